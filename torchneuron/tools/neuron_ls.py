"""``neuron-ls``: list the neuron devices, their properties and memory use.

The devices are simulated, one set per process, so "in use" is the memory
this process's caching allocator holds (none, for a fresh process).
"""

import argparse
import json
import sys


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def collect() -> list:
    import torch

    rows = []
    for index in range(torch.neuron.device_count()):
        props = torch.neuron.get_device_properties(index)
        free, total = torch.neuron.mem_get_info(index)
        rows.append({
            "index": index,
            "device": f"neuron:{index}",
            "name": props.name,
            "target": props.target,
            "logical_core": props.logical_core,
            "logical_nc_config": props.logical_nc_config,
            "total_memory": total,
            "free_memory": free,
            "reserved_by_this_process": torch.neuron.memory_reserved(index),
            "sbuf": f"{props.sbuf_partitions} x {props.sbuf_partition_bytes // 1024} KiB",
            "psum": f"{props.psum_partitions} x {props.psum_partition_bytes // 1024} KiB "
                    f"({props.psum_banks} banks)",
            "tensor_engine_ghz": props.tensor_engine_hz / 1e9,
            "vector_engine_ghz": props.vector_engine_hz / 1e9,
            "dma_gb_per_s": props.dma_bytes_per_s / 1e9,
        })
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="neuron-ls", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the device list as JSON")
    args = parser.parse_args(argv)
    import torch
    import torchneuron  # noqa: F401  (also works with TORCH_DEVICE_BACKEND_AUTOLOAD=0)

    try:
        torch.neuron._lazy_init()
    except Exception as err:  # a malformed NEURON_* variable
        print(f"neuron-ls: {err}", file=sys.stderr)
        return 1
    rows = collect()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no neuron devices are visible (check NEURON_RT_VISIBLE_CORES)")
        return 0
    header = f"{'DEVICE':<10}{'NAME':<34}{'CORE':>5}{'MEMORY':>12}{'IN USE':>12}  SBUF / PSUM"
    print(header)
    print("-" * len(header) + "-" * 30)
    for r in rows:
        print(f"{r['device']:<10}{r['name']:<34}{r['logical_core']:>5}{_gib(r['total_memory']):>12}"
              f"{_gib(r['reserved_by_this_process']):>12}  {r['sbuf']} / {r['psum']}")
    first = rows[0]
    print(f"\n{len(rows)} device(s), target {first['target']}, logical NC config "
          f"{first['logical_nc_config']}; Tensor engine {first['tensor_engine_ghz']:.2f} GHz, "
          f"Vector engine {first['vector_engine_ghz']:.2f} GHz, DMA {first['dma_gb_per_s']:.0f} GB/s per core.")
    print("Simulated NeuronCores: memory in use is this process's.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
