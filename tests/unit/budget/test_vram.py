"""`netprobe budget vram` (docs/numbers.md, docs/api.md): the built-in figures against the models' published
configurations, the arithmetic by hand, the edges of "fits", and the command through a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from netprobe.budget.vram import (
    GIB,
    MODELS,
    Architecture,
    custom_architecture,
    estimate,
    find_model,
    kv_bytes_per_token,
    parse_gpus,
    weight_bytes,
)
from netprobe.errors import UsageError

# The published config.json figures (Hugging Face, deepseek-ai/<name>; V3/R1 and V2-Lite also in
# github.com/deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json and config_16B.json).
# Dense: vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
# num_key_value_heads, head_dim, q/k/v bias (Qwen2 has it, Llama not), max_position_embeddings.
DENSE = {
    "deepseek-r1-distill-qwen-1.5b": (151_936, 1536, 8960, 28, 12, 2, 128, True, 131_072),
    "deepseek-r1-distill-qwen-7b": (152_064, 3584, 18_944, 28, 28, 4, 128, True, 131_072),
    "deepseek-r1-distill-llama-8b": (128_256, 4096, 14_336, 32, 32, 8, 128, False, 131_072),
    "deepseek-r1-distill-qwen-14b": (152_064, 5120, 13_824, 48, 40, 8, 128, True, 131_072),
    "deepseek-r1-distill-qwen-32b": (152_064, 5120, 27_648, 64, 40, 8, 128, True, 131_072),
    "deepseek-r1-distill-llama-70b": (128_256, 8192, 28_672, 80, 64, 8, 128, False, 131_072),
}
# MLA + MoE: vocab_size, hidden_size, intermediate_size, moe_intermediate_size, num_hidden_layers,
# first_k_dense_replace, num_attention_heads, n_routed_experts, n_shared_experts, q_lora_rank,
# kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, max_position_embeddings.
MLA = {
    "deepseek-v2-lite": (102_400, 2048, 10_944, 1408, 27, 1, 16, 64, 2, None, 512, 128, 64, 128, 163_840),
    "deepseek-v3": (129_280, 7168, 18_432, 2048, 61, 3, 128, 256, 1, 1536, 512, 128, 64, 128, 163_840),
    "deepseek-r1": (129_280, 7168, 18_432, 2048, 61, 3, 128, 256, 1, 1536, 512, 128, 64, 128, 163_840),
}
# Published totals: Hugging Face's safetensors "Model size" (1.78B, 7.62B, 8.03B, 14.8B, 32.8B, 70.6B;
# DeepSeek-V2-Lite 15.7B) and DeepSeek-V3's README (671B main model; the 685B on Hugging Face adds the
# 14B multi-token-prediction module, which serving without speculative decoding does not load).
PUBLISHED_B = {"deepseek-r1-distill-qwen-1.5b": 1.78, "deepseek-r1-distill-qwen-7b": 7.62,
               "deepseek-r1-distill-llama-8b": 8.03, "deepseek-r1-distill-qwen-14b": 14.8,
               "deepseek-r1-distill-qwen-32b": 32.8, "deepseek-r1-distill-llama-70b": 70.6,
               "deepseek-v2-lite": 15.7, "deepseek-v3": 671, "deepseek-r1": 671}


def dense_params(vocab: int, h: int, inter: int, layers: int, heads: int, kv: int, hd: int,
                 bias: bool) -> int:
    """Embedding and output head (untied in every distill), per layer q/k/v/o + SwiGLU MLP + 2 norms."""
    q = h * heads * hd + (heads * hd if bias else 0)
    k = h * kv * hd + (kv * hd if bias else 0)
    layer = q + 2 * k + heads * hd * h + 3 * h * inter + 2 * h
    return 2 * vocab * h + layers * layer + h


def mla_params(vocab: int, h: int, inter: int, moe: int, layers: int, dense: int, heads: int, routed: int,
               shared: int, q_lora: int | None, kv_lora: int, nope: int, rope: int, v: int) -> int:
    q = h * q_lora + q_lora + q_lora * heads * (nope + rope) if q_lora else h * heads * (nope + rope)
    kv = h * (kv_lora + rope) + kv_lora + kv_lora * heads * (nope + v)
    attn = q + kv + heads * v * h + 2 * h
    router = routed * h + (routed if routed == 256 else 0)   # V3's gate has an e_score_correction_bias
    moe_layer = (routed + shared) * 3 * h * moe + router
    return 2 * vocab * h + h + layers * attn + dense * 3 * h * inter + (layers - dense) * moe_layer


# --- the built-in figures against the published configurations ------------------------------------

def test_every_published_model_is_built_in() -> None:
    assert {m.name for m in MODELS} == set(DENSE) | set(MLA)


@pytest.mark.parametrize("name", sorted(DENSE))
def test_distill_figures_match_config_json(name: str) -> None:
    vocab, h, inter, layers, heads, kv, hd, bias, max_ctx = DENSE[name]
    m = find_model(name)
    assert (m.arch.layers, m.arch.kv_heads, m.arch.head_dim, m.max_ctx) == (layers, kv, hd, max_ctx)
    assert hd == h // heads and not m.arch.mla
    assert m.arch.params == dense_params(vocab, h, inter, layers, heads, kv, hd, bias)
    assert m.arch.params / 1e9 == pytest.approx(PUBLISHED_B[name], abs=0.05)
    assert kv_bytes_per_token(m.arch, "bf16") == 2 * layers * kv * hd * 2       # K and V, 2 bytes each
    assert m.weights == "bf16"


@pytest.mark.parametrize("name", sorted(MLA))
def test_latent_attention_figures_match_config(name: str) -> None:
    (vocab, h, inter, moe, layers, dense, heads, routed, shared, q_lora, kv_lora, nope, rope, v,
     max_ctx) = MLA[name]
    m = find_model(name)
    assert m.arch.mla and (m.arch.layers, m.arch.kv_lora_rank, m.arch.rope_dim) == (layers, kv_lora, rope)
    assert m.max_ctx == max_ctx
    assert m.arch.params == mla_params(vocab, h, inter, moe, layers, dense, heads, routed, shared, q_lora,
                                       kv_lora, nope, rope, v)
    assert m.arch.params / 1e9 == pytest.approx(PUBLISHED_B[name], rel=0.005)
    assert kv_bytes_per_token(m.arch, "bf16") == layers * (kv_lora + rope) * 2
    assert m.weights == ("fp8" if name != "deepseek-v2-lite" else "bf16")   # V3/R1 ship fp8 weights


def test_kv_bytes_per_token_by_hand() -> None:
    # DeepSeek-R1-Distill-Llama-8B: 32 layers × 8 KV heads × 128 head dim × 2 (K and V) × 2 bytes
    assert kv_bytes_per_token(find_model("deepseek-r1-distill-llama-8b").arch, "bf16") == 131_072
    # DeepSeek-V3's MLA: 61 layers × (512 latent + 64 rope) × 2 bytes
    assert kv_bytes_per_token(find_model("deepseek-v3").arch, "bf16") == 70_272
    assert kv_bytes_per_token(find_model("deepseek-v3").arch, "fp8") == 35_136
    assert kv_bytes_per_token(find_model("deepseek-r1-distill-qwen-7b").arch, "fp16") == 2 * 28 * 4 * 128 * 2
    assert kv_bytes_per_token(find_model("deepseek-v2-lite").arch, "bf16") == 27 * (512 + 64) * 2


def test_names_aliases_and_unknown() -> None:
    assert find_model("DeepSeek-R1").name == "deepseek-r1"
    assert find_model("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B").name == "deepseek-r1-distill-qwen-32b"
    assert find_model("deepseek-r1:7b").name == "deepseek-r1-distill-qwen-7b"
    assert find_model("deepseek-v3-0324").arch == find_model("deepseek-r1").arch
    with pytest.raises(UsageError, match=r"--model: unknown model 'gpt-4'.*deepseek-r1-distill-qwen-1\.5b"):
        find_model("gpt-4")


# --- the arithmetic ---------------------------------------------------------------------------------

def test_weights_by_width() -> None:
    n = 8_030_261_248                                           # DeepSeek-R1-Distill-Llama-8B
    assert weight_bytes(n, "bf16") == weight_bytes(n, "fp16") == 2 * n
    assert float(weight_bytes(n, "bf16")) / GIB == pytest.approx(14.957, abs=0.001)
    assert weight_bytes(n, "fp8") == weight_bytes(n, "int8") == n
    # int4: half a byte, plus one fp16 scale per group of 128 weights
    assert weight_bytes(n, "int4") == Fraction(n, 2) + Fraction(2 * n, 128)
    assert float(weight_bytes(n, "int4")) / GIB == pytest.approx(3.856, abs=0.001)
    with pytest.raises(UsageError, match="--quant: unknown width 'int3'"):
        weight_bytes(n, "int3")


def test_weights_kv_and_margin_in_gib() -> None:
    m = find_model("deepseek-r1-distill-llama-8b")
    e = estimate(m.arch, quant="bf16", ctx=8192, concurrency=4, model=m)
    assert e.kv_cache_bytes == 131_072 * 8192 * 4 == 4 * GIB
    d = e.to_dict()
    assert d["kv_cache_gib"] == 4.0 and d["kv_bytes_per_token"] == 131_072
    assert d["weights_gib"] == pytest.approx(2 * 8_030_261_248 / GIB)
    assert d["margin_gib"] == pytest.approx(0.2 * (d["weights_gib"] + 4.0))
    assert d["total_gib"] == pytest.approx(1.2 * (d["weights_gib"] + 4.0))
    no_margin = estimate(m.arch, quant="bf16", ctx=8192, concurrency=4, margin_pct=Fraction(0)).to_dict()
    assert no_margin["margin_gib"] == 0 and no_margin["total_gib"] == pytest.approx(d["weights_gib"] + 4.0)
    # DeepSeek-R1 at its published fp8: 671,026,419,200 bytes of weights, 0.54 GiB of latent KV at 8k
    r1 = find_model("deepseek-r1")
    big = estimate(r1.arch, quant=r1.weights, ctx=8192, model=r1).to_dict()
    assert big["weights_gib"] == pytest.approx(671_026_419_200 / GIB) and big["kv_bytes_per_token"] == 70_272
    assert big["kv_cache_gib"] == pytest.approx(70_272 * 8192 / GIB)


# A model made so that everything is a whole GiB: 2^29 parameters × 2 B = 1 GiB of weights; 32 layers ×
# 8 KV heads × 128 × 2 × 2 B = 128 KiB per token, × 8,192 tokens = 1 GiB per sequence. With the 20 %
# margin, c sequences need 1.2 × (1 + c) GiB: 6 GiB holds exactly 4.
EVEN = Architecture(params=2 ** 29, layers=32, kv_heads=8, head_dim=128)


def _fit(gpu: str | Fraction, concurrency: int = 4, margin: int = 20) -> tuple[bool, bool, int, int]:
    sizes = parse_gpus(gpu) if isinstance(gpu, str) else (gpu,)
    e = estimate(EVEN, quant="bf16", ctx=8192, concurrency=concurrency, gpus_gib=sizes,
                 margin_pct=Fraction(margin))
    f = e.fits[0]
    return f.fits, f.weights_fit, f.max_concurrency, f.max_ctx


def test_fits_at_the_edges() -> None:
    assert _fit("6") == (True, True, 4, 8192)              # 1.2 × (1 + 4) = 6 GiB exactly: fits
    assert _fit(Fraction(6 * GIB - 1, GIB)) == (False, True, 3, 8191)   # a byte under: one sequence fewer
    assert _fit("5.999") == (False, True, 3, 8190)
    assert _fit("6", concurrency=5) == (False, True, 4, 6553)   # 4 GiB of KV over 5 sequences
    assert _fit("1.2") == (False, True, 0, 0)              # the weights and their margin, nothing else
    assert _fit("1.1") == (False, False, 0, 0)             # not even the weights
    assert _fit("5", margin=0) == (True, True, 4, 8192)    # no margin: 1 + 4 GiB in 5 GiB


def test_max_ctx_stops_at_what_the_model_reads() -> None:
    m = find_model("deepseek-r1-distill-qwen-1.5b")
    e = estimate(m.arch, quant="bf16", ctx=8192, gpus_gib=parse_gpus("80"), model=m)
    assert e.fits[0].max_ctx == 131_072 and e.fits[0].max_concurrency > 100


def test_tensor_parallel_splits_weights_and_heads_but_not_the_latent() -> None:
    llama = find_model("deepseek-r1-distill-llama-70b")
    four = estimate(llama.arch, quant="bf16", ctx=8192, concurrency=8, gpus=4, model=llama,
                    gpus_gib=parse_gpus("48"))
    assert four.kv_bytes_per_token_per_gpu == 2 * 80 * (8 // 4) * 128 * 2 == 81_920
    assert four.kv_cache_bytes == 327_680 * 8192 * 8                     # split, nothing copied
    # per GPU: (131.42 / 4 + 5) × 1.2 = 45.42 GiB in 48: fits
    per_gpu = (Fraction(2 * llama.arch.params, 4) + 81_920 * 8192 * 8) * Fraction(6, 5)
    assert four.fits[0].fits and four.fits[0].headroom_gib == pytest.approx(48 - float(per_gpu) / GIB)
    # 48 / 1.2 = 40 GiB, less 32.854 GiB of weights = 7.146 GiB for sequences of 0.625 GiB on each GPU
    assert four.fits[0].max_concurrency == 11
    assert four.to_dict()["per_gpu_gib"] == pytest.approx(float(per_gpu) / GIB)
    sixteen = estimate(llama.arch, quant="bf16", ctx=8192, gpus=16)
    assert sixteen.kv_bytes_per_token_per_gpu == 2 * 80 * 1 * 128 * 2  # 8 KV heads on 16 GPUs: copied
    assert sixteen.kv_cache_bytes == 2 * 327_680 * 8192
    r1 = find_model("deepseek-r1")
    eight = estimate(r1.arch, quant="fp8", ctx=32_768, concurrency=16, gpus=8, model=r1,
                     gpus_gib=parse_gpus("80,141"))
    assert eight.kv_bytes_per_token_per_gpu == eight.kv_bytes_per_token == 70_272   # the latent, whole
    assert eight.kv_cache_bytes == 8 * 70_272 * 32_768 * 16
    assert [(f.fits, f.weights_fit) for f in eight.fits] == [(False, False), (True, True)]
    assert eight.to_dict()["gpus"] == 8


def test_gpu_sizes_and_custom_figures_are_checked() -> None:
    assert parse_gpus("24, 48,80") == (Fraction(24), Fraction(48), Fraction(80))
    assert parse_gpus("40.5") == (Fraction(81, 2),)
    for bad, message in (("24,,80", "--gpu-gb: '' is not a number"), ("0", "--gpu-gb: sizes must be"),
                         ("-8", "--gpu-gb: sizes must be"), ("1/0", "--gpu-gb: '1/0' is not a number")):
        with pytest.raises(UsageError, match=message):
            parse_gpus(bad)
    assert custom_architecture(7.6, 28, 4, 128, None, None) == Architecture(
        params=7_600_000_000, layers=28, kv_heads=4, head_dim=128)
    mla = custom_architecture(671, 61, None, None, 512, 64)
    assert mla.mla and mla.kv_elements_per_token == 61 * 576
    for args, message in (
            ((None, None, None, None, None, None), "--model: required"),
            ((7, 28, None, 128, None, None), "--kv-heads: required without --model"),
            ((7, 28, 4, 0, None, None), "--head-dim: must be positive, got 0"),
            ((-7, 28, 4, 128, None, None), "--params: must be positive, got -7"),
            ((7, 28, None, None, 512, None), "--rope-dim: required"),
            ((7, 28, 4, None, 512, 64), "--kv-heads: not with --kv-lora-rank")):
        with pytest.raises(UsageError, match=message):
            custom_architecture(*args)


# --- the command, through a real process -----------------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "COLUMNS": "250", "PYTHONPATH": path}
    return subprocess.run([sys.executable, "-m", "netprobe.cli", "budget", "vram", *args],
                          capture_output=True, text=True, timeout=120, env=env)


def test_json_has_the_pinned_fields() -> None:
    out = _cli("--model", "deepseek-r1-distill-llama-8b", "--ctx", "8192", "--concurrency", "4",
               "--gpu-gb", "24,48,80", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert {"weights_gib", "kv_cache_gib", "kv_bytes_per_token", "margin_gib", "total_gib", "fits"} <= set(d)
    assert d["kv_bytes_per_token"] == 131_072 and d["kv_cache_gib"] == 4.0
    assert d["quant"] == "bf16" and d["kv_quant"] == "bf16" and d["attention"] == "gqa"
    assert [f["gpu_gib"] for f in d["fits"]] == [24, 48, 80]
    for f in d["fits"]:
        assert {"gpu_gib", "fits", "max_concurrency"} <= set(f)
    # 24 GiB: (14.96 + 4) × 1.2 = 22.75 GiB fits; 24 / 1.2 − 14.96 = 5.04 GiB of KV = 5 sequences of 1 GiB
    assert d["fits"][0]["fits"] is True and d["fits"][0]["max_concurrency"] == 5
    custom = json.loads(_cli("--params", "671.0264192", "--layers", "61", "--kv-lora-rank", "512",
                             "--rope-dim", "64", "--quant", "fp8", "--kv-quant", "fp8", "--json").stdout)
    assert custom["kv_bytes_per_token"] == 61 * 576 and custom["attention"] == "mla"
    assert custom["model"] is None and custom["fits"][-1]["max_concurrency"] == 0


def test_table_shows_memory_per_token_and_each_gpu() -> None:
    out = _cli("--model", "deepseek-v3", "--gpu-gb", "80,141")
    assert out.returncode == 0, out.stderr
    assert "70,272 B" in out.stdout and "61 layers × (512 latent + 64 rope) × 2 B" in out.stdout
    assert "fp8 weights" in out.stdout and "not even the weights" in out.stdout
    small = _cli("--model", "r1-distill-qwen-7b", "--quant", "int4", "--ctx", "32768", "--concurrency", "8")
    assert small.returncode == 0 and "57,344 B" in small.stdout and "yes" in small.stdout
    node = _cli("--model", "deepseek-r1", "--gpus", "8", "--gpu-gb", "80,141", "--ctx", "32768",
                "--concurrency", "16")
    assert node.returncode == 0 and "tensor parallel over 8 GPUs" in node.stdout
    assert "8 × 141" in node.stdout and "the latent is whole on every rank" in node.stdout


@pytest.mark.parametrize(("args", "option"), [
    (("--model", "llama-3-8b"), "--model"),
    (("--model", "deepseek-r1", "--params", "7"), "--params"),
    (("--params", "7", "--layers", "28", "--kv-heads", "4"), "--head-dim"),
    (("--params", "7", "--layers", "28", "--kv-heads", "4", "--head-dim", "-128"), "--head-dim"),
    (("--model", "deepseek-r1", "--quant", "q4_k_m"), "--quant"),
    (("--model", "deepseek-r1", "--kv-quant", "int4"), "--kv-quant"),
    (("--model", "deepseek-r1", "--ctx", "0"), "--ctx"),
    (("--model", "deepseek-r1", "--ctx", "1000000"), "--ctx"),
    (("--model", "deepseek-r1", "--concurrency", "0"), "--concurrency"),
    (("--model", "deepseek-r1", "--gpu-gb", "80,big"), "--gpu-gb"),
    (("--model", "deepseek-r1", "--margin-pct", "-5"), "--margin-pct"),
    (("--model", "deepseek-r1", "--gpus", "0"), "--gpus"),
    ((), "--model"),
])
def test_usage_errors_exit_2_naming_the_option(args: tuple[str, ...], option: str) -> None:
    out = _cli(*args)
    assert out.returncode == 2 and option in out.stderr and not out.stdout
