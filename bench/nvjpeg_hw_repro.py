#!/usr/bin/env python3
"""nvJPEG's hardware decoder driven directly, without stoker: does it stop returning? (issue 26)

On the H200 a decode thread of stoker's sometimes stayed inside nvjpegDecodeBatched (docs/guides/gpu.md, "JPEG
decode on the GPU"). This drives libnvjpeg through ctypes as stoker's src/device/nvjpeg_decoder.cc
did then: one nvjpegHandle (NVJPEG_BACKEND_HARDWARE), one nvjpegJpegState and one non-blocking CUDA
stream per thread ("lane"), nvjpegDecodeBatchedInitialize only when the batch size changes,
nvjpegDecodeBatched on the lane's stream, bitstreams in cudaHostRegister'ed host memory, RGBI out
(pitch w*3), on SA-1B-sized 4:2:0 JPEGs made here with Pillow. Each switch turns on one thing that
DALI, nvImageCodec or torchvision do differently, so a stall here, and the switch that ends it,
say whether nvJPEG (or the driver) is at fault and what avoids it; no stall here puts it in stoker.

  python3 bench/nvjpeg_hw_repro.py --threads 3 --seconds 20       # as stoker did
  python3 bench/nvjpeg_hw_repro.py --threads 3 --reinit --sync    # as the references do (stoker now)
  python3 bench/nvjpeg_hw_repro.py --threads 3 --serial           # one hardware decode at a time
  python3 bench/nvjpeg_hw_repro.py --threads 3 --flags 1          # NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE
  python3 bench/nvjpeg_hw_repro.py --lib torchvision|wheel|PATH   # which libnvjpeg

The issue-46 matrix (bench/device_gpu_decode.sh): 3 states concurrent against serialized
against 1, batch 7 (the H100/H200's 7 engines x 1 core) against 8, with and without
--prealloc, and stoker's way now (one state, batches of whole engine units, Initialize and a
host sync around every batch, PreAllocate):
  python3 bench/nvjpeg_hw_repro.py --threads 1 --batch 7 --reinit --sync --prealloc 2250x2250

Prints one line "RESULT ok|STALL|ERROR ..." and exits 0 (ok), 3 (a decode call made no progress
for --stall-s seconds: Python stacks, nvidia-smi's utilization and the kernel's Xid lines first)
or 1. Needs torch with CUDA, numpy and Pillow. Not yet run on a GPU: written in a session that had
none (bench/device_gpu_decode.sh runs it on the next).
"""
import argparse, ctypes, faulthandler, glob, io, os, subprocess, sys, threading, time

import numpy as np

P = ctypes.c_void_p
ap = argparse.ArgumentParser()
ap.add_argument("--lib", default="wheel", help="wheel | torchvision | a path to libnvjpeg.so.*")
ap.add_argument("--threads", type=int, default=3)
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--seconds", type=float, default=20)
ap.add_argument("--stall-s", type=float, default=8)
ap.add_argument("--serial", action="store_true", help="global lock around Initialize+DecodeBatched")
ap.add_argument("--flags", type=int, default=0, help="nvjpegCreateEx flags (1 = HW_DECODE_NO_PIPELINE)")
ap.add_argument("--reinit", action="store_true", help="nvjpegDecodeBatchedInitialize before every batch")
ap.add_argument("--sync", action="store_true", help="cudaStreamSynchronize(lane stream) before each decode")
ap.add_argument("--prealloc", default="", help="WxH: nvjpegDecodeBatchedPreAllocate per state")
ap.add_argument("--handle-per-thread", action="store_true")
ap.add_argument("--stream-flags", type=int, default=1, help="1 non-blocking (stoker), 0 blocking")
ap.add_argument("--input", default="registered", choices=["registered", "pinned", "pageable"])
ap.add_argument("--load", action="store_true", help="matmuls on the legacy default stream meanwhile")
ap.add_argument("--vary", action="store_true", help="batch size varies 1..batch (as decode=auto)")
ap.add_argument("--images", type=int, default=24)
ap.add_argument("--cache", default="/tmp/nvjpeg_hw_repro", help="directory keeping the made JPEGs between runs ('' none)")
a = ap.parse_args()

import torch  # noqa: E402  (after argparse so --help works without CUDA)
torch.cuda.init()
dev = torch.device("cuda", 0)
torch.empty(1, device=dev)  # the primary context, current on this thread


def loaded(sub):
    with open("/proc/self/maps") as f:
        for line in f:
            if sub in line and ".so" in line:
                return line.split()[-1]
    return None


def find_lib(which):
    if os.path.exists(which):
        return which
    pats = {"wheel": "nvidia/cu13/lib/libnvjpeg.so.13", "torchvision": "torchvision.libs/libnvjpeg*.so*"}[which]
    for d in sys.path:
        hits = sorted(glob.glob(os.path.join(d, pats)))
        if hits:
            return hits[0]
    sys.exit(f"RESULT ERROR no libnvjpeg for --lib {which}")


rt = ctypes.CDLL(loaded("libcudart") or "libcudart.so.13")
nj = ctypes.CDLL(find_lib(a.lib), mode=os.RTLD_NOW | os.RTLD_LOCAL)


class NvImage(ctypes.Structure):
    _fields_ = [("channel", P * 4), ("pitch", ctypes.c_size_t * 4)]


def sig(lib, name, *args):
    f = getattr(lib, name)
    f.argtypes, f.restype = list(args), ctypes.c_int
    return f


ci, cu, cs, pp = ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.POINTER(P)
CreateEx = sig(nj, "nvjpegCreateEx", ci, P, P, cu, pp)
StateCreate = sig(nj, "nvjpegJpegStateCreate", P, pp)
Init = sig(nj, "nvjpegDecodeBatchedInitialize", P, P, ci, ci, ci)
Decode = sig(nj, "nvjpegDecodeBatched", P, P, P, P, ctypes.POINTER(NvImage), P)
PreAlloc = sig(nj, "nvjpegDecodeBatchedPreAllocate", P, P, ci, ci, ci, ci, ci)
HwInfo = sig(nj, "nvjpegGetHardwareDecoderInfo", P, ctypes.POINTER(cu), ctypes.POINTER(cu))
GetProp = sig(nj, "nvjpegGetProperty", ci, ctypes.POINTER(ci))
StreamCreate = sig(rt, "cudaStreamCreateWithFlags", pp, cu)
StreamSync = sig(rt, "cudaStreamSynchronize", P)
HostRegister = sig(rt, "cudaHostRegister", P, cs, cu)


def ok(st, what):
    if st:
        print(f"RESULT ERROR {what} -> {st}", flush=True)
        os._exit(1)


def new_handle():
    h = P()
    ok(CreateEx(3, None, None, a.flags, ctypes.byref(h)), "nvjpegCreateEx(HARDWARE)")
    return h


ver = []
for t in range(3):
    v = ci()
    GetProp(t, ctypes.byref(v))
    ver.append(v.value)
shared = new_handle()
eng, cores = cu(), cu()
HwInfo(shared, ctypes.byref(eng), ctypes.byref(cores))

# SA-1B-like baseline 4:2:0 JPEGs, both orientations and a few sizes (so nvJPEG grows its buffers)
sizes = [(2250, 1500), (1500, 2250), (2048, 1536), (2250, 1500), (1536, 2048)]
rng = np.random.default_rng(0)
jpegs = []
import pickle  # noqa: E402
cache = os.path.join(a.cache, f"jpegs-{a.images}.pkl") if a.cache else None
if cache and os.path.exists(cache):  # the matrix's runs share one set (made once, ~5 s)
    with open(cache, "rb") as f:
        jpegs = pickle.load(f)
from PIL import Image  # noqa: E402
for i in range(len(jpegs), a.images):
    w, h = sizes[i % len(sizes)]
    small = rng.integers(0, 256, (h // 48 + 2, w // 48 + 2, 3), dtype=np.uint8)
    arr = np.asarray(Image.fromarray(small).resize((w, h), Image.BICUBIC), dtype=np.int16)
    arr = np.clip(arr + rng.integers(-6, 7, arr.shape), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=90, subsampling=2)
    jpegs.append((buf.getvalue(), w, h))
if cache and not os.path.exists(cache):
    os.makedirs(a.cache, exist_ok=True)
    with open(cache + ".tmp", "wb") as f:
        pickle.dump(jpegs, f)
    os.replace(cache + ".tmp", cache)
total = sum(len(j[0]) for j in jpegs)
if a.input == "pinned":
    host = torch.empty(total, dtype=torch.uint8, pin_memory=True).numpy()
else:
    host = np.empty(total + 4096, dtype=np.uint8)
    if a.input == "registered":
        ok(HostRegister(host.ctypes.data, host.nbytes, 0), "cudaHostRegister")
ptrs, lens, off = [], [], 0
for data, w, h in jpegs:
    host[off:off + len(data)] = np.frombuffer(data, np.uint8)
    ptrs.append(host.ctypes.data + off)
    lens.append(len(data))
    off += len(data)
max_bytes = max(w * h * 3 for _, w, h in jpegs)

lock = threading.Lock()
stop = threading.Event()
busy_since = [None] * a.threads  # monotonic time the current decode call began, None when not in one
batches = [0] * a.threads
errors = []


def lane(tid):
    handle = new_handle() if a.handle_per_thread else shared
    state, stream = P(), P()
    ok(StateCreate(handle, ctypes.byref(state)), "nvjpegJpegStateCreate")
    ok(StreamCreate(ctypes.byref(stream), a.stream_flags), "cudaStreamCreateWithFlags")
    if a.prealloc:
        pw, ph = (int(x) for x in a.prealloc.split("x"))
        ok(PreAlloc(handle, state, a.batch, pw, ph, 0, 5), "nvjpegDecodeBatchedPreAllocate")
    out = torch.empty(a.batch * max_bytes, dtype=torch.uint8, device=dev)
    initialized, k = -1, tid
    r = np.random.default_rng(tid)
    while not stop.is_set():
        n = int(r.integers(1, a.batch + 1)) if a.vary else a.batch
        idx = [(k * a.batch + j) % len(jpegs) for j in range(n)]
        k += a.threads
        data = (P * n)(*[ptrs[i] for i in idx])
        lengths = (cs * n)(*[lens[i] for i in idx])
        imgs = (NvImage * n)()
        for j, i in enumerate(idx):
            imgs[j].channel[0] = out.data_ptr() + j * max_bytes
            imgs[j].pitch[0] = jpegs[i][1] * 3
        if a.serial:
            lock.acquire()
        try:
            busy_since[tid] = time.monotonic()
            if a.sync:
                ok(StreamSync(stream), "cudaStreamSynchronize")
            if a.reinit or n != initialized:
                ok(Init(handle, state, n, 1, 5), "nvjpegDecodeBatchedInitialize")
                initialized = n
            st = Decode(handle, state, data, lengths, imgs, stream)
            busy_since[tid] = None
        finally:
            if a.serial:
                lock.release()
        if st:
            errors.append(st)
            initialized = -1
        batches[tid] += 1


def load():
    x = torch.randn(4096, 4096, device=dev)
    while not stop.is_set():
        for _ in range(20):
            x = torch.tanh(x @ x)  # legacy default stream, as torch's training step
        torch.cuda.synchronize()


desc = (f"lib={a.lib} nvjpeg={'.'.join(map(str, ver))} engines={eng.value}x{cores.value} threads={a.threads} "
        f"batch={a.batch}{' vary' if a.vary else ''} serial={a.serial} flags={a.flags} reinit={a.reinit} "
        f"sync={a.sync} prealloc={a.prealloc or '-'} handles={'per-thread' if a.handle_per_thread else 'shared'} "
        f"stream_flags={a.stream_flags} input={a.input} load={a.load}")
print("config:", desc, flush=True)
threads = [threading.Thread(target=lane, args=(t,), daemon=True) for t in range(a.threads)]
if a.load:
    threads.append(threading.Thread(target=load, daemon=True))
t0 = time.monotonic()
for t in threads:
    t.start()
while time.monotonic() - t0 < a.seconds:
    time.sleep(0.5)
    now = time.monotonic()
    stuck = [i for i, s in enumerate(busy_since) if s is not None and now - s > a.stall_s]
    if stuck:
        print(f"RESULT STALL after {now - t0:.1f} s: lanes {stuck} inside a decode call for > {a.stall_s} s; "
              f"batches per lane {batches}; {desc}", flush=True)
        faulthandler.dump_traceback(all_threads=True)
        for cmd in (["nvidia-smi", "-q", "-d", "UTILIZATION"], ["sh", "-c", "dmesg 2>&1 | grep -i xid | tail -5"]):
            try:
                print(subprocess.run(cmd, capture_output=True, text=True, timeout=15).stdout[-2500:], flush=True)
            except Exception as e:  # noqa: BLE001
                print("could not run", cmd, e)
        os._exit(3)
stop.set()
dt = time.monotonic() - t0
n_img = sum(batches) * (a.batch if not a.vary else (a.batch + 1) / 2)
print(f"RESULT ok {sum(batches)} batches ({batches}), ~{n_img / dt:.0f} images/s, errors {errors[:5]}; {desc}",
      flush=True)
os._exit(0)
