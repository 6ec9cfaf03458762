// torch.profiler device activity: a Kineto activity profiler for the
// PrivateUse1 backend (REGISTER_PRIVATEUSE1_PROFILER, torch 2.13's
// torch/csrc/profiler/standalone/privateuse1_profiler.h). Kineto runs it as
// a child profiler when the PrivateUse1 activity is asked for: start/stop
// switch the runtime's recording (neuronrt/profile.h), push/pop of the
// correlation id follow each CPU op on the thread that runs it (the
// runtime stamps the id on the launches made inside), and processTrace
// turns the streams' records into activities:
//   - the launch, on the launching thread (PRIVATEUSE1_RUNTIME), with the
//     start of a flow arrow;
//   - the work on the device's stream lane (CONCURRENT_KERNEL, GPU_MEMCPY),
//     linked to the CPU op (device time per op) and ending the arrow;
//     containers (an adaptive fused group, a compiled program) are
//     GPU_USER_ANNOTATION spans around their members or steps, so that
//     device time is counted once;
//   - the roofline estimate on a lane "estimated <target>" per stream
//     (GPU_USER_ANNOTATION, left out of the profiler's totals).
#include <torch/extension.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>

#include <time.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "neuronrt/nrt.h"

namespace torchneuron {
namespace {

using libkineto::ActivityType;

// Lanes of the estimate: beside the stream's, ids apart from every stream.
constexpr int32_t kEstimateLaneBase = 1 << 20;

int64_t realtime_minus_monotonic_ns() {
  timespec real, mono;
  clock_gettime(CLOCK_REALTIME, &real);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  return (int64_t(real.tv_sec) - int64_t(mono.tv_sec)) * 1000000000LL +
         (int64_t(real.tv_nsec) - int64_t(mono.tv_nsec));
}

const char* launch_name(int32_t kind) {
  switch (kind) {
    case NRT_PROFILE_COPY: return "nrtMemcpyAsync";
    case NRT_PROFILE_KERNEL: case NRT_PROFILE_FUSED_MEMBER: return "nrtLaunch";
    case NRT_PROFILE_PROGRAM: return "nrtProgramLaunch";
    case NRT_PROFILE_NKI: return "nrtNcProgramLaunch";
    default: return "nrtLaunchHostTask";
  }
}

std::string target_name() {
  nrt_device_properties props;
  if (nrt_device_get_properties(0, &props) != NRT_SUCCESS) return "trainium";
  return props.target_name;
}

// The records of the trace processed last, for torchneuron.profiler's
// summary (the profiler's events do not keep an activity's metadata).
std::mutex last_mu;
std::vector<nrt_profile_record> last_records;

class NeuronProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    offset_ns_ = realtime_minus_monotonic_ns();
    if (nrt_profile_start() != NRT_SUCCESS) {
      errors_.push_back(std::string("neuron profiler: ") + nrt_last_error());
      status_ = libkineto::TraceStatus::ERROR;
      return;
    }
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    nrt_profile_stop();
    collect();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return errors_; }

  void pushCorrelationId(uint64_t id) override { nrt_profile_push_correlation(id); }
  void popCorrelationId() override { nrt_profile_pop_correlation(); }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked_of, int64_t, int64_t) override {
    collect(); // records that completed after stop (the profiler synchronised meanwhile)
    const std::string estimate_prefix = "estimated " + target_name() + ": ";
    std::map<std::pair<int32_t, int64_t>, int64_t> estimate_free;  // per lane
    for (const nrt_profile_record& r : records_) {
      const libkineto::ITraceActivity* cpu_op =
          linked_of && r.correlation ? linked_of(int32_t(r.correlation)) : nullptr;
      lanes_.insert({r.device, r.stream});
      if (r.launch_ns) log_launch(logger, r, cpu_op);
      log_work(logger, r, cpu_op);
      bool leaf_of_estimate = r.kind != NRT_PROFILE_FUSED_MEMBER && r.kind != NRT_PROFILE_PROGRAM_STEP;
      if (r.est_ns > 0 && leaf_of_estimate) {
        // Laid out in stream order: from the measured start, or after the
        // estimate before it when that runs longer.
        int64_t& free_at = estimate_free[{r.device, r.stream}];
        int64_t start = std::max<int64_t>(int64_t(r.start_ns) + offset_ns_, free_at);
        int64_t end = start + std::max<int64_t>(1, int64_t(r.est_ns));
        free_at = end;
        libkineto::GenericTraceActivity a(span_, ActivityType::GPU_USER_ANNOTATION,
                                          estimate_prefix + r.name);
        a.startTime = start;
        a.endTime = end;
        a.device = r.device;
        a.resource = kEstimateLaneBase + int32_t(r.stream);
        a.id = int32_t(r.launch_id);
        add_estimate_metadata(a, r);
        a.addMetadataQuoted("note", "a roofline model, not a measurement");
        a.log(logger);
      }
    }
    {
      std::lock_guard<std::mutex> lock(last_mu);
      last_records = std::move(records_);
    }
    records_.clear();
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    int32_t count = 0;
    nrt_device_count(&count);
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{
        0, 0x1000000, "neuron", count > 1 ? "neuron devices" : "neuron:0"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    const std::string target = target_name();
    for (auto [device, stream] : lanes_) {
      std::string lane = "neuron:" + std::to_string(device) + " stream " + std::to_string(stream);
      out.push_back({stream, 2 * stream, device, lane});
      out.push_back({kEstimateLaneBase + stream, 2 * stream + 1, device,
                     "estimated " + target + " (" + lane + ")"});
    }
    return out;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

  std::unordered_map<std::string, std::string> getMetadata() override {
    return {{"neuron_target", "\"" + target_name() + "\""}};
  }

 private:
  static void keep(const nrt_profile_record* r, void* self) {
    static_cast<NeuronProfilerSession*>(self)->records_.push_back(*r);
  }

  void collect() {
    uint64_t dropped = nrt_profile_drain(&keep, this);
    if (dropped)
      errors_.push_back("neuron profiler: " + std::to_string(dropped) +
                        " device records dropped (a stream's ring of " +
                        std::to_string(NRT_PROFILE_RING_RECORDS) + " was full)");
  }

  void log_launch(libkineto::ActivityLogger& logger, const nrt_profile_record& r,
                  const libkineto::ITraceActivity* cpu_op) {
    libkineto::GenericTraceActivity a(span_, ActivityType::PRIVATEUSE1_RUNTIME, launch_name(r.kind));
    a.startTime = int64_t(r.launch_ns) + offset_ns_;
    a.endTime = std::max(int64_t(r.launched_ns) + offset_ns_, a.startTime + 1);
    a.device = libkineto::processId();
    a.resource = r.launch_tid;
    a.threadId = r.launch_tid;
    a.id = int32_t(r.launch_id);
    a.linked = cpu_op;
    a.flow.id = uint32_t(r.launch_id);
    a.flow.type = libkineto::kLinkAsyncCpuGpu;
    a.flow.start = 1;
    a.addMetadataQuoted("kernel", r.name);
    a.log(logger);
  }

  void log_work(libkineto::ActivityLogger& logger, const nrt_profile_record& r,
                const libkineto::ITraceActivity* cpu_op) {
    bool container = r.kind == NRT_PROFILE_FUSED || r.kind == NRT_PROFILE_PROGRAM;
    bool part = r.kind == NRT_PROFILE_PROGRAM_STEP;
    ActivityType type = container ? ActivityType::GPU_USER_ANNOTATION
                        : r.kind == NRT_PROFILE_COPY ? ActivityType::GPU_MEMCPY
                                                     : ActivityType::CONCURRENT_KERNEL;
    libkineto::GenericTraceActivity a(span_, type, r.name);
    a.startTime = int64_t(r.start_ns) + offset_ns_;
    a.endTime = std::max(int64_t(r.end_ns) + offset_ns_, a.startTime + 1);
    a.device = r.device;
    a.resource = int32_t(r.stream);
    a.threadId = r.worker_tid;
    a.id = int32_t(r.launch_id);
    // The CPU op's device time counts leaves: kernels, members, steps.
    if (!container) a.linked = cpu_op;
    if (r.launch_ns) {
      a.flow.id = uint32_t(r.launch_id);
      a.flow.type = libkineto::kLinkAsyncCpuGpu;
      a.flow.start = 0;
    }
    a.addMetadata("device", r.device);
    a.addMetadata("stream", r.stream);
    a.addMetadataQuoted("kind", nrt_profile_kind_name(r.kind));
    a.addMetadata("correlation", r.correlation);
    a.addMetadata("worker thread", r.worker_tid);
    if (part) a.addMetadataQuoted("part of", "compiled program");
    add_estimate_metadata(a, r);
    a.log(logger);
  }

  static void add_estimate_metadata(libkineto::GenericTraceActivity& a, const nrt_profile_record& r) {
    if (r.est_ns <= 0) return;
    a.addMetadata("estimated ns", r.est_ns);
    a.addMetadataQuoted("bound", nrt_bound_name(r.bound));
    a.addMetadataQuoted("engine", nrt_roofline_engine_name(r.engine));
    a.addMetadata("bytes", r.bytes);
    a.addMetadata("flops", r.flops);
    if (r.link_bytes > 0) a.addMetadata("link bytes", r.link_bytes);
  }

  libkineto::TraceSpan span_{0, 0, "neuron"};
  int64_t offset_ns_ = 0;
  std::vector<nrt_profile_record> records_;
  std::set<std::pair<int32_t, int64_t>> lanes_;
  std::vector<std::string> errors_;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& types, const libkineto::Config&) override {
    // Only when torch.profiler asked for device activity (a CPU-only
    // profile asks for PRIVATEUSE1_RUNTIME too, but not for kernels).
    if (!types.count(ActivityType::CONCURRENT_KERNEL)) return nullptr;
    return std::make_unique<NeuronProfilerSession>();
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<ActivityType>& types, const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"neuron"};
  std::set<ActivityType> activities_{ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                     ActivityType::GPU_USER_ANNOTATION,
                                     ActivityType::PRIVATEUSE1_RUNTIME};
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

}  // namespace
}  // namespace torchneuron

void register_profiler_bindings(py::module_& m);
void register_profiler_bindings(py::module_& m) {
  m.def("_profile_active", [] { return nrt_profile_active() != 0; });
  m.def("_roofline_target", [] { return torchneuron::target_name(); });
  // (correlation, kind, name, device ns, estimated ns, bound, bytes, link
  // bytes) per record of the trace processed last.
  m.def("_profile_last_records", [] {
    std::vector<std::tuple<uint64_t, std::string, std::string, double, double, std::string, double,
                           double>>
        out;
    std::lock_guard<std::mutex> lock(torchneuron::last_mu);
    for (const nrt_profile_record& r : torchneuron::last_records)
      out.emplace_back(r.correlation, nrt_profile_kind_name(r.kind), r.name,
                       double(r.end_ns - r.start_ns), r.est_ns, nrt_bound_name(r.bound), r.bytes,
                       r.link_bytes);
    return out;
  });
}
