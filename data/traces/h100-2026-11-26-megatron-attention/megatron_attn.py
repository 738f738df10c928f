# Which copies does Megatron-LM's unfused core attention launch? A standalone re-statement of the
# tensor operations of megatron/core/transformer/dot_product_attention.py (split of the fused QKV
# projection, query reshape, key/value view or repeat_interleave for grouped queries, baddbmm,
# softmax, bmm, context permute + contiguous), run forward and backward under the PyTorch profiler.
# Prints every GPU kernel of the forward and of the backward with its duration.
import sys, torch
from torch.profiler import profile, ProfilerActivity, record_function

dev = "cuda"
sq, b, np_, hn = 1024, 8, 12, 64
h = np_ * hn

def core(mixed, ng):
    per = np_ // ng
    q, k, v = torch.split(mixed, [per * hn, hn, hn], dim=3)      # views of [sq, b, ng, (per + 2) hn]
    q = q.reshape(sq, b, np_, hn)
    if per > 1:
        k = k.repeat_interleave(per, dim=2)
        v = v.repeat_interleave(per, dim=2)
    q = q.reshape(sq, b * np_, hn)
    k = k.view(sq, b * np_, hn)
    buf = torch.empty(b * np_, sq, sq, dtype=q.dtype, device=dev)
    scores = torch.baddbmm(buf, q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2), beta=0.0, alpha=0.125)
    probs = torch.softmax(scores.view(b, np_, sq, sq), dim=-1)
    v = v.view(sq, b * np_, hn)
    ctx = torch.bmm(probs.view(b * np_, sq, sq), v.transpose(0, 1))
    return ctx.view(b, np_, sq, hn).permute(2, 0, 1, 3).contiguous().view(sq, b, h)

def run(ng):
    mixed = torch.randn(sq, b, ng, (np_ // ng + 2) * hn, device=dev, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(sq, b, h, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        core(mixed, ng).backward(grad)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("FWD"):
            out = core(mixed, ng)
            torch.cuda.synchronize()
        with record_function("BWD"):
            out.backward(grad)
            torch.cuda.synchronize()
    evs = prof.events()
    ranges = {e.name: (e.time_range.start, e.time_range.end) for e in evs if e.name in ("FWD", "BWD")}
    print(f"== ng={ng} (query heads {np_}, kv groups {ng}), sq={sq} b={b} hn={hn}, bf16, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    for phase in ("FWD", "BWD"):
        lo, hi = ranges[phase]
        ks = []
        for e in evs:
            if e.name in ("FWD", "BWD") or e.device_type.name != "CPU":
                continue
            if not (lo <= e.time_range.start <= hi):
                continue
            for k in e.kernels:
                ks.append((e.name, k.name, k.duration))
        seen = set()
        for op, kn, dur in ks:
            key = (op, kn, dur)
            if key in seen:
                continue
            seen.add(key)
            print(f"  {phase} {op:32s} {dur:9.1f} us  {kn[:110]}")
    sys.stdout.flush()

for ng in (12, 4):
    run(ng)
