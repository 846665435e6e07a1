#!/usr/bin/env python3
"""The peer of examples/train_llama: the same Llama shape and training step
in eager PyTorch, timed the same way (steps after the first 2, wall clock).

Modes (one process per rank, Gloo over localhost, like train_llama under
tools/dtrun --backend gloo):
  single   one process, one thread
  tp       Megatron tensor parallelism written by hand: wq/wk/wv/w1/w3 split
           by output rows, wo/w2 by input columns, one all-reduce after each
           (forward) and of each block input's gradient (backward)
  ddp      DistributedDataParallel (2 buckets, overlapped all-reduce)

Prints one line: "<mode> <ranks> <median ms per step>".
Needs PyTorch (Debian: apt-get install python3-torch).
"""
import argparse
import math
import os
import statistics
import sys
import time

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn.functional as F
except ImportError:
    print("skip: PyTorch is not installed (apt-get install python3-torch)")
    sys.exit(0)

# nn/configs/tiny.json and train_llama's defaults.
DIM, LAYERS, HEADS, KV_HEADS, VOCAB = 256, 4, 8, 4, 256
HIDDEN = 704  # 4 * 256 * 2 / 3 = 682, rounded up to a multiple of 64
BATCH, SEQ, LR = 8, 64, 3e-3


class Copy(torch.autograd.Function):
    """Megatron's f: identity forward, all-reduce of the gradient."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        dist.all_reduce(g)
        return g


class Reduce(torch.autograd.Function):
    """Megatron's g: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def rope(x, cos, sin):
    # x [b, s, h, d]: rotate interleaved pairs, like Meta's reference.
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


class Block(torch.nn.Module):
    def __init__(self, tp):
        super().__init__()
        hd = DIM // HEADS
        self.tp, self.h, self.kv = tp, HEADS // tp, KV_HEADS // tp
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)
        self.wq, self.wk = lin(DIM, self.h * hd), lin(DIM, self.kv * hd)
        self.wv, self.wo = lin(DIM, self.kv * hd), lin(self.h * hd, DIM)
        self.w1, self.w3 = lin(DIM, HIDDEN // tp), lin(DIM, HIDDEN // tp)
        self.w2 = lin(HIDDEN // tp, DIM)
        self.g1 = torch.nn.Parameter(torch.ones(DIM))
        self.g2 = torch.nn.Parameter(torch.ones(DIM))

    def norm(self, x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * g

    def enter(self, x):
        return Copy.apply(x) if self.tp > 1 else x

    def leave(self, x):
        return Reduce.apply(x) if self.tp > 1 else x

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        hd = DIM // HEADS
        h = self.enter(self.norm(x, self.g1))
        q = rope(self.wq(h).view(b, s, self.h, hd), cos, sin)
        k = rope(self.wk(h).view(b, s, self.kv, hd), cos, sin)
        v = self.wv(h).view(b, s, self.kv, hd)
        rep = self.h // self.kv
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        att = (q.transpose(1, 2) @ k.transpose(1, 2).transpose(-1, -2))
        att = att / math.sqrt(hd)
        mask = torch.full((s, s), float("-inf")).triu(1)
        att = torch.softmax(att + mask, dim=-1)
        o = (att @ v.transpose(1, 2)).transpose(1, 2).reshape(b, s, -1)
        x = x + self.leave(self.wo(o))
        h = self.enter(self.norm(x, self.g2))
        return x + self.leave(self.w2(F.silu(self.w1(h)) * self.w3(h)))


class Llama(torch.nn.Module):
    def __init__(self, tp):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, DIM)
        self.blocks = torch.nn.ModuleList(Block(tp) for _ in range(LAYERS))
        self.g = torch.nn.Parameter(torch.ones(DIM))
        self.out = torch.nn.Linear(DIM, VOCAB, bias=False)
        hd = DIM // HEADS
        freqs = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).float() / hd))
        angles = torch.outer(torch.arange(SEQ).float(), freqs)
        self.cos = angles.cos()[None, :, None, :]
        self.sin = angles.sin()[None, :, None, :]
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)

    def forward(self, tokens):
        x = self.emb(tokens)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.g
        return self.out(x)


def batches(seed, rows):
    gen = torch.Generator().manual_seed(seed)
    while True:
        data = torch.randint(0, VOCAB, (rows, SEQ + 1), generator=gen)
        yield data[:, :-1], data[:, 1:]


def train(rank, world, mode, steps, port, results):
    torch.set_num_threads(1)
    if world > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = Llama(world if mode == "tp" else 1)
    rows = BATCH // world if mode == "ddp" else BATCH
    if mode == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    data = batches(1 + (rank if mode == "ddp" else 0), rows)
    times = []
    for _ in range(steps):
        tokens, targets = next(data)
        start = time.perf_counter()
        loss = F.cross_entropy(model(tokens).view(-1, VOCAB), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    if rank == 0:
        results.put(statistics.median(times[2:]) * 1e3)
    if world > 1:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["single", "tp", "ddp"])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--port", type=int, default=29517)
    args = parser.parse_args()
    world = 1 if args.mode == "single" else 2
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=train, args=(r, world, args.mode, args.steps,
                                             args.port, results))
             for r in range(world)]
    for p in procs:
        p.start()
    ms = results.get()
    for p in procs:
        p.join()
    print(f"{args.mode} {world} {ms:.2f}")


if __name__ == "__main__":
    main()
