#!/usr/bin/env python3
"""The PyTorch 2.x figures that bench/gpu_bench is compared with, measured on
the same GPU in the same run (the device bundle's run.sh calls this):

  matmul     4096^2 products, f32 (TF32 off) and bf16, TFLOP/s
  copy/add/sum  64M f32 elements, GB/s counting bytes read plus written
  attention  causal grouped-query scaled_dot_product_attention forward +
             backward, bf16, TFLOP/s (causal flops: half of the full square)
  llama      one training step (forward, backward, AdamW) of 1B-shaped Llama
             layers (nn/configs/1b.json: dim 2048, 32 heads, 8 kv heads, ffn
             8192, vocab 128256) in bf16, eager: two layers at --llama_batch x
             --llama_seq, and --big_layers layers at --big_batch x --big_seq
             (0 layers: none); tokens/s, the model flops a token (the same
             count for any implementation, to make MFU from tokens/s), MFU
             where the device's peak is known, peak memory allocated

Prints one line per figure: "<name> <value> <unit>". Skips (exit 0) without
PyTorch or without a CUDA device.
"""
import argparse
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("skip: PyTorch is not installed")
    sys.exit(0)


def timed(fn, warmup=3, reps=10):
    """Median seconds of fn() over reps runs, each synchronized."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def report(name, value, unit):
    print(f"{name} {value:.2f} {unit}", flush=True)


def bench_matmul():
    torch.backends.cuda.matmul.allow_tf32 = False
    n = 4096
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        seconds = timed(lambda: a @ b)
        report(f"torch_matmul_{str(dtype)[6:]}", 2 * n**3 / seconds / 1e12,
               "TFLOP/s")


def bench_bandwidth():
    n = 64 << 20
    a = torch.ones(n, device="cuda")
    b = torch.empty_like(a)
    report("torch_copy", 2 * a.nbytes / timed(lambda: b.copy_(a)) / 1e9, "GB/s")
    report("torch_add", 3 * a.nbytes / timed(lambda: a + a) / 1e9, "GB/s")
    rows = a.view(-1, 4096)
    report("torch_sum_rows", a.nbytes / timed(lambda: rows.sum(1)) / 1e9,
           "GB/s")


def bench_attention(batch=4, heads=32, kv_heads=8, seq=2048, head_dim=128):
    q = torch.randn(batch, heads, seq, head_dim, device="cuda",
                    dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(batch, kv_heads, seq, head_dim, device="cuda",
                    dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn_like(k, requires_grad=True)
    grad = torch.randn_like(q)

    def step():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                             enable_gqa=True)
        out.backward(grad)

    # Forward: two products of 2*s*s*d each, half of them under the mask;
    # backward: five such products.
    flops = 7 * 2 * batch * heads * seq * seq * head_dim / 2
    report("torch_sdpa_fwd_bwd", flops / timed(step) / 1e12, "TFLOP/s")


class Block(torch.nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)
        self.wq, self.wk = lin(dim, dim), lin(dim, kv_heads * self.head_dim)
        self.wv, self.wo = lin(dim, kv_heads * self.head_dim), lin(dim, dim)
        self.w1, self.w3, self.w2 = lin(dim, hidden), lin(dim, hidden), lin(
            hidden, dim)
        self.attention_norm = torch.nn.RMSNorm(dim, eps=1e-5)
        self.ffn_norm = torch.nn.RMSNorm(dim, eps=1e-5)

    def rope(self, x, cos, sin):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos),
                           -1).flatten(-2)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        h = self.attention_norm(x)
        q = self.rope(self.wq(h).view(b, s, self.heads, -1), cos, sin)
        k = self.rope(self.wk(h).view(b, s, self.kv_heads, -1), cos, sin)
        v = self.wv(h).view(b, s, self.kv_heads, -1)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True,
                                           enable_gqa=True)
        x = x + self.wo(o.transpose(1, 2).reshape(b, s, -1))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


# Dense bf16 tensor-core peaks in TFLOP/s, by a word of the device's name.
PEAK_BF16_TFLOPS = {"H200": 989.4, "H100": 989.4, "A100": 312.0}


def model_flops_per_token(layers, seq, dim, heads, kv_heads, hidden, vocab):
    """Forward + backward flops a token: 6 per weight of every matmul
    (attention projections, feed-forward, output; not the embedding lookup)
    and, per layer, causal attention's two s x s products (2 * 2 * s * dim
    forward, halved by the mask, three times that with the backward)."""
    kv_dim = kv_heads * (dim // heads)
    layer_weights = 2 * dim * dim + 2 * dim * kv_dim + 3 * dim * hidden
    weights = layers * layer_weights + dim * vocab
    return 6 * weights + layers * 6 * seq * dim


def bench_llama(batch, seq, layers=2, dim=2048, heads=32, kv_heads=8,
                hidden=8192, vocab=128256):
    torch.manual_seed(0)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    dtype = torch.bfloat16
    emb = torch.nn.Embedding(vocab, dim)
    blocks = torch.nn.ModuleList(
        Block(dim, heads, kv_heads, hidden) for _ in range(layers))
    norm = torch.nn.RMSNorm(dim, eps=1e-5)
    out = torch.nn.Linear(dim, vocab, bias=False)
    model = torch.nn.ModuleList([emb, blocks, norm, out]).to("cuda", dtype)
    head_dim = dim // heads
    freqs = 1.0 / (500000.0**(torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(seq).float(), freqs)
    cos = angles.cos()[None, :, None, :].to("cuda", dtype)
    sin = angles.sin()[None, :, None, :].to("cuda", dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, vocab, (batch, seq + 1), device="cuda")

    def step():
        x = emb(tokens[:, :-1])
        for block in blocks:
            x = block(x, cos, sin)
        logits = out(norm(x)).float()
        loss = F.cross_entropy(logits.view(-1, vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    name = f"llama_l{layers}_b{batch}_s{seq}"
    tokens_per_s = batch * seq / timed(step, warmup=2, reps=5)
    report(f"torch_{name}", tokens_per_s, "tokens/s")
    flops = model_flops_per_token(layers, seq, dim, heads, kv_heads, hidden,
                                  vocab)
    report(f"model_flops_per_token_{name}", flops / 1e9, "GFLOP")
    device = torch.cuda.get_device_name(0)
    for word, peak in PEAK_BF16_TFLOPS.items():
        if word in device:
            report(f"torch_mfu_{name}", 100 * tokens_per_s * flops / 1e12 / peak,
                   f"% of {peak} TFLOP/s")
    report(f"torch_peak_memory_{name}",
           torch.cuda.max_memory_allocated() / 2**30, "GiB")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--llama_batch", type=int, default=4)
    parser.add_argument("--llama_seq", type=int, default=2048)
    parser.add_argument("--big_layers", type=int, default=8)
    parser.add_argument("--big_batch", type=int, default=8)
    parser.add_argument("--big_seq", type=int, default=2048)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("skip: no CUDA device")
        return
    print(f"device {torch.cuda.get_device_name(0)} torch {torch.__version__}")
    bench_matmul()
    bench_bandwidth()
    bench_attention()
    bench_llama(args.llama_batch, args.llama_seq)
    if args.big_layers > 0:
        bench_llama(args.big_batch, args.big_seq, layers=args.big_layers)


if __name__ == "__main__":
    main()
