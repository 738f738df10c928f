"""Times (and profiles) three PyTorch training steps on one GPU, as described in
data/traces/h100-2026-11-23/README.md: random initialisation and inputs, autocast bfloat16 with
fp32 parameters, fused AdamW for the language models, SGD with momentum for ResNet-50,
loss.backward(); opt.step(); opt.zero_grad(set_to_none=True); no torch.compile.

Step time: CUDA-synchronised wall clock per step, median of 5 after 3 warm-up steps (unprofiled),
then one profiled step (Kineto, CPU + CUDA, record_shapes=True) written as gzipped Chrome JSON.
Usage: python3 train_steps.py OUT_DIR [names...]
"""
import gzip, json, os, shutil, statistics, sys, time, traceback

import torch


def sdpa(cfg):
    try:
        cfg._attn_implementation = "sdpa"
    except Exception:
        pass


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_embd=768, n_layer=12, n_head=12, vocab_size=50257)
    sdpa(cfg)
    return GPT2LMHeadModel(cfg), (8, 1024), cfg.vocab_size


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
                      num_key_value_heads=8, intermediate_size=8192, vocab_size=128256,
                      tie_word_embeddings=True, max_position_embeddings=2048)
    sdpa(cfg)
    return LlamaForCausalLM(cfg), (2, 2048), cfg.vocab_size


def language_step(build):
    model, (b, s), vocab = build()
    model = model.cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randint(0, vocab, (b, s), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    step.attn = getattr(model.config, "_attn_implementation", None)
    return step


def resnet():
    import torchvision
    model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(128, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (128,), device="cuda")
    lossf = torch.nn.CrossEntropyLoss()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


CASES = {
    "gpt2-124m-b8-s1024": lambda: language_step(gpt2),
    "llama-1b-b2-s2048": lambda: language_step(llama),
    "resnet50-b128": resnet,
}


def run(name, out):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    step = CASES[name]()
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated() / 2**30
    rec = {"name": name, "step_s_unprofiled_median": statistics.median(times), "step_s_all": times,
           "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "peak_alloc_gib": peak,
           "attn_implementation": getattr(step, "attn", None)}
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        step()
        torch.cuda.synchronize()
    path = os.path.join(out, f"trace-{name}.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(path)
    return rec


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(CASES)
    os.makedirs(out, exist_ok=True)
    try:
        import transformers
        tv = transformers.__version__
    except Exception:
        tv = None
    with open(os.path.join(out, "traces.jsonl"), "a") as f:
        for name in names:
            try:
                rec = run(name, out)
                rec["transformers"] = tv
                f.write(json.dumps(rec) + "\n")
                f.flush()
                print(json.dumps(rec), flush=True)
            except Exception:
                traceback.print_exc()
                print(f"{name}: failed", flush=True)


if __name__ == "__main__":
    main()
