"""Hugging Face transformers models on neuron against the same models on CPU.

GPT-2 and Llama are built from small configs (no weights are downloaded:
the hub is switched off) with random weights, copied to neuron, and run
there and on CPU: the forward pass (logits and the language-model loss), the
backward pass (every parameter's gradient), greedy ``generate()`` with and
without the KV cache and on a left-padded batch, and beam search, which must
give the same tokens; sampling runs natively; a few training steps (also
under autocast with a GradScaler). Nine more architectures (Mistral, Qwen2,
Gemma, Phi, GPT-NeoX, OPT, BERT, T5, BART) get the forward, backward and
greedy checks once each. No op may fall back to the CPU. Skipped when
transformers (the "test" extra) is not installed.

Tolerances: both sides compute in float32, but the GEMM and attention kernels
add in another order than PyTorch's, so logits agree to about 1e-5 relative;
the gradients to a few 1e-5. Greedy decoding is exact as long as no two
logits are closer than that: the configs use a wide initialisation so that
the top two logits of every step are far apart (checked on the CPU run).
Training: three AdamW steps (fused on neuron) on one batch give the CPU's
losses to 1e-5; under float16/bfloat16 autocast with a GradScaler they stay
within 2e-3/1e-2 of the float32 losses (about ten times what was seen).
"""

import copy
import os

import pytest
import torch

# Never reach the hub: everything here is built from configs.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
transformers = pytest.importorskip("transformers")

import torchneuron  # noqa: E402

VOCAB = 1000
PROMPT = 8
NEW_TOKENS = 32


def gpt2(attn):
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=4,
        initializer_range=0.2, bos_token_id=0, eos_token_id=None, pad_token_id=0,
        attn_implementation=attn)
    return transformers.GPT2LMHeadModel(config)


def llama(attn):
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        initializer_range=0.2, bos_token_id=0, eos_token_id=None, pad_token_id=0,
        attn_implementation=attn)
    return transformers.LlamaForCausalLM(config)


MODELS = {"gpt2": gpt2, "llama": llama}
CASES = [(name, attn) for name in MODELS for attn in ("sdpa", "eager")]


@pytest.fixture(scope="module", autouse=True)
def one_cpu_thread():
    """The CPU reference runs on one thread: its ops are tiny, and with two
    threads OpenMP's barriers stall for seconds when other processes share
    the cores. (The neuron runtime has its own thread pool.)"""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def models(request):
    """(cpu model, neuron model) with the same weights, in eval mode."""
    name, attn = request.param
    torch.manual_seed(0)
    cpu = MODELS[name](attn).eval()
    dev = copy.deepcopy(cpu).to("neuron")
    # Module.to() keeps the tie (GPT-2's head and token embedding) because
    # neuron tensors are shallow-copy compatible with CPU tensors: the
    # parameter moves in place. No tie_weights() here, so that is tested.
    assert len(list(dev.parameters())) == len(list(cpu.parameters()))
    return cpu, dev


def token_ids(batch, length, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, VOCAB, (batch, length), generator=g)


@pytest.fixture
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}, "ops fell back to the CPU"


def test_forward_logits_and_loss_match_cpu(models, no_fallback):
    cpu, dev = models
    ids = token_ids(2, 24)
    with torch.no_grad():
        expected = cpu(ids, labels=ids)
        actual = dev(ids.to("neuron"), labels=ids.to("neuron"))
    torch.testing.assert_close(actual.logits.cpu(), expected.logits, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(actual.loss.cpu(), expected.loss, rtol=1e-5, atol=1e-5)


def test_forward_with_padding_mask_matches_cpu(models, no_fallback):
    cpu, dev = models
    ids = token_ids(2, 12, seed=2)
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # left padding on the first row
    with torch.no_grad():
        expected = cpu(ids, attention_mask=mask).logits
        actual = dev(ids.to("neuron"), attention_mask=mask.to("neuron")).logits
    torch.testing.assert_close(actual.cpu()[:, 4:], expected[:, 4:], rtol=1e-4, atol=1e-4)


def test_backward_gradients_match_cpu(models, no_fallback):
    cpu, dev = models
    ids = token_ids(2, 16, seed=3)
    cpu.zero_grad(set_to_none=True)
    dev.zero_grad(set_to_none=True)
    cpu(ids, labels=ids).loss.backward()
    dev(ids.to("neuron"), labels=ids.to("neuron")).loss.backward()
    dev_params = dict(dev.named_parameters())
    for name, p_cpu in cpu.named_parameters():
        p_dev = dev_params[name]
        assert p_dev.grad is not None, name
        torch.testing.assert_close(p_dev.grad.cpu(), p_cpu.grad, rtol=1e-4, atol=1e-5, msg=name)
    cpu.zero_grad(set_to_none=True)
    dev.zero_grad(set_to_none=True)


def greedy(model, ids, use_cache):
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False,
                              use_cache=use_cache, pad_token_id=0)


def top2_gap(model, tokens):
    """The smallest gap between the two largest logits over the generated steps."""
    with torch.no_grad():
        logits = model(tokens).logits[:, PROMPT - 1:-1]
    top = logits.topk(2, dim=-1).values
    return (top[..., 0] - top[..., 1]).min().item()


@pytest.mark.parametrize("use_cache", [True, False], ids=["kv_cache", "no_cache"])
def test_greedy_generate_gives_cpu_tokens(models, use_cache, no_fallback):
    cpu, dev = models
    ids = token_ids(2, PROMPT, seed=4)
    expected = greedy(cpu, ids, use_cache)
    assert expected.shape == (2, PROMPT + NEW_TOKENS)
    # Far from ties, so the comparison is not down to rounding.
    assert top2_gap(cpu, expected) > 1e-3
    actual = greedy(dev, ids.to("neuron"), use_cache)
    assert actual.device.type == "neuron"
    assert torch.equal(actual.cpu(), expected)


def test_left_padded_batch_generate_gives_cpu_tokens(models, no_fallback):
    cpu, dev = models
    ids = token_ids(3, PROMPT, seed=8)
    mask = torch.ones_like(ids)
    ids[0, :3], mask[0, :3] = 0, 0  # shorter prompts, padded on the left
    ids[2, :5], mask[2, :5] = 0, 0
    kw = dict(max_new_tokens=16, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        expected = cpu.generate(ids, attention_mask=mask, **kw)
        actual = dev.generate(ids.to("neuron"), attention_mask=mask.to("neuron"), **kw)
    assert torch.equal(actual.cpu(), expected)


def test_beam_search_gives_cpu_tokens(models, no_fallback):
    cpu, dev = models
    ids = token_ids(2, PROMPT, seed=5)
    kw = dict(max_new_tokens=12, do_sample=False, num_beams=3, pad_token_id=0)
    with torch.no_grad():
        expected = cpu.generate(ids, **kw)
        actual = dev.generate(ids.to("neuron"), **kw)
    assert torch.equal(actual.cpu(), expected)


def test_sampling_runs_natively(models, no_fallback):
    # The draws come from the device's generator, so only their form is checked.
    _, dev = models
    ids = token_ids(2, PROMPT, seed=6).to("neuron")
    with torch.no_grad():
        out = dev.generate(ids, max_new_tokens=12, do_sample=True, top_k=20, top_p=0.9,
                           temperature=0.8, pad_token_id=0)
    assert out.shape == (2, PROMPT + 12) and out.device.type == "neuron"
    assert torch.equal(out[:, :PROMPT], ids)
    assert int(out.min()) >= 0 and int(out.max()) < VOCAB


def fresh_copies(models):
    """Copies of the pair that a test may train (the fixture's are shared)."""
    cpu, dev = models
    cpu, dev = copy.deepcopy(cpu), copy.deepcopy(dev)
    return cpu, dev


def train_steps(model, device, steps, autocast_dtype=None, fused=False):
    """AdamW steps (in eval mode: no dropout, so the sides can be compared)
    with a gradient scaler under float16 autocast; returns the losses."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=fused)
    scaler = torch.amp.GradScaler(device, enabled=autocast_dtype == torch.float16)
    losses = []
    for step in range(steps):
        ids = token_ids(2, 16, seed=10).to(device)  # one batch: the loss must fall
        with torch.autocast(device, dtype=autocast_dtype or torch.float32,
                            enabled=autocast_dtype is not None):
            loss = model(ids, labels=ids).loss
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def test_training_steps_match_cpu(models, no_fallback):
    cpu, dev = fresh_copies(models)
    expected = train_steps(cpu, "cpu", 3)
    actual = train_steps(dev, "neuron", 3, fused=True)
    assert expected[-1] < expected[0]
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=0)  # seen: 1.2e-7


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_autocast_training_with_grad_scaler_runs_natively(models, dtype, no_fallback):
    # CPU autocast casts other ops than neuron's (CUDA's lists), so the
    # losses are compared with the float32 run at the autocast dtype's
    # precision rather than with CPU autocast.
    cpu, dev = fresh_copies(models)
    expected = train_steps(cpu, "cpu", 3)
    actual = train_steps(dev, "neuron", 3, autocast_dtype=dtype, fused=True)
    tol = 1e-2 if dtype == torch.bfloat16 else 2e-3  # seen: 8e-4, 2e-4
    torch.testing.assert_close(actual, expected, rtol=tol, atol=0)


# ---- more architectures: the same checks, once each ------------------------

SMALL = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, initializer_range=0.2, pad_token_id=0, eos_token_id=None)
SEQ2SEQ = dict(vocab_size=VOCAB, d_model=64, pad_token_id=0, eos_token_id=None,
               decoder_start_token_id=0)
MORE = {
    "mistral": lambda t: t.MistralForCausalLM(t.MistralConfig(**SMALL, num_key_value_heads=2,
                                                              sliding_window=8)),
    "qwen2": lambda t: t.Qwen2ForCausalLM(t.Qwen2Config(**SMALL, num_key_value_heads=2)),
    "gemma": lambda t: t.GemmaForCausalLM(t.GemmaConfig(**SMALL, num_key_value_heads=2, head_dim=16)),
    "phi": lambda t: t.PhiForCausalLM(t.PhiConfig(**SMALL)),
    "gpt_neox": lambda t: t.GPTNeoXForCausalLM(t.GPTNeoXConfig(**SMALL)),
    "opt": lambda t: t.OPTForCausalLM(t.OPTConfig(
        vocab_size=VOCAB, hidden_size=64, ffn_dim=128, num_hidden_layers=2, num_attention_heads=4,
        word_embed_proj_dim=64, init_std=0.2, pad_token_id=0, eos_token_id=None)),
    "bert": lambda t: t.BertForMaskedLM(t.BertConfig(**SMALL)),
    "t5": lambda t: t.T5ForConditionalGeneration(t.T5Config(
        **SEQ2SEQ, d_ff=128, num_layers=2, num_heads=4, d_kv=16)),
    "bart": lambda t: t.BartForConditionalGeneration(t.BartConfig(
        **SEQ2SEQ, encoder_ffn_dim=128, decoder_ffn_dim=128, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, init_std=0.2)),
}


@pytest.mark.parametrize("arch", list(MORE))
def test_other_architectures_match_cpu(arch, no_fallback):
    torch.manual_seed(0)
    cpu = MORE[arch](transformers).eval()
    dev = copy.deepcopy(cpu).to("neuron")
    ids = token_ids(2, 12, seed=7)
    labels = ids[:, :6].contiguous() if cpu.config.is_encoder_decoder else ids
    expected = cpu(ids, labels=labels)
    actual = dev(ids.to("neuron"), labels=labels.to("neuron"))
    torch.testing.assert_close(actual.logits.detach().cpu(), expected.logits.detach(), rtol=1e-4, atol=1e-4)
    expected.loss.backward()
    actual.loss.backward()
    dev_params = dict(dev.named_parameters())
    for name, p in cpu.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(dev_params[name].grad.cpu(), p.grad, rtol=1e-4, atol=1e-5,
                                       msg=name)
    if arch == "bert":
        return
    with torch.no_grad():
        kw = dict(max_new_tokens=10, do_sample=False, pad_token_id=0)
        tokens = cpu.generate(ids[:, :6], **kw)
        assert torch.equal(dev.generate(ids[:, :6].to("neuron"), **kw).cpu(), tokens)
