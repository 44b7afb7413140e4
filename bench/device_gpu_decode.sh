#!/usr/bin/env bash
# The one device run for issue 26 (GPU JPEG decode), from the repository root
# on a machine with a CUDA GPU, under 5 minutes when nothing stalls:
#   1. installs the carried wheels (.whl/*.whl, made here by
#      scripts/device_wheels.sh: stoker built with nvcc, nvidia-nvjpeg,
#      webdataset, braceexpand) into /tmp/site, without the network;
#   2. the GPU tests: tests/python/test_gpu_decode_device.py and
#      tests/python/test_cuda.py (10-17 s on the H200, killed at 50 s);
#   3. bench/gpu_decode.py's Stall part: S with decode="gpu" and 16 batches
#      in flight, where nvJPEG's hardware decoder stopped returning in 6 of 6
#      runs before each batch waited for its lane's last one and initialized
#      the state (README, "JPEG decode on the GPU"); stacks after 25 s. If it
#      still stalls (up to 3 minutes more): again on the wheel's libnvjpeg
#      rather than torchvision's, and bench/nvjpeg_hw_repro.py, nvJPEG
#      without stoker, 20 s each, as stoker drove it before (a stall there is
#      nvJPEG's or the driver's) and as now;
#   4. bench/gpu_decode.py: every figure of the "Done means" against
#      its target, 2 rounds (V and S took 58 s on the H200), JSON to
#      $OUT/gpu_decode.json, rewritten after every part; a run not ended
#      after 130 s prints every thread's Python and native stacks (--watchdog;
#      the ResNet part stalled in 3 of 4 runs on the H200).
# Everything is also written to $OUT/log.txt. Exits 0 whatever failed, so
# the log and the JSON come back.
#
#   OUT=/tmp/out bash bench/device_gpu_decode.sh
#
# On the lent device machine ($OUT is set there): carry [".whl"], command
# `bash bench/device_gpu_decode.sh`, timeout_s 480 (at most ~10 s install +
# 50 s tests + 60 s stall + 170 s bench: under 5 minutes; a stall adds 60 s
# for the second library and 90 s for the repro).
set -u
OUT=${OUT:-/tmp/gpu-decode-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

run() {
    date -u +"start %Y-%m-%dT%H:%M:%SZ"
    # every carried wheel: stoker's (cp312 on the device), nvidia-nvjpeg, webdataset, braceexpand
    wheels=$(ls .whl/*.whl)
    echo "installing: $wheels"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $wheels \
        || echo "WARNING: pip install of $wheels failed (rc=$?)"
    export PYTHONPATH=/tmp/site
    chmod +x /tmp/site/stoker/bin/* 2>/dev/null  # `stoker synth` makes the bench's images
    nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
    echo "nproc: $(nproc)"
    python3 -c 'import sys, stoker, torch, torchvision; print("python", sys.version.split()[0], "| stoker", stoker.__version__, stoker.__file__, "| torch", torch.__version__, "| torchvision", torchvision.__version__)'

    echo "== tests (killed at 50 s) =="
    SECONDS=0
    # no -x: one device run, so every failing test is seen, not only the first
    timeout 50 python3 -m pytest -q -rfEs -p no:cacheprovider \
        tests/python/test_gpu_decode_device.py tests/python/test_cuda.py
    echo "tests: rc=$? in ${SECONDS} s"

    echo "== bench/gpu_decode.py --parts Stall (stacks at 25 s, killed at 60 s) =="
    SECONDS=0
    timeout 60 python3 bench/gpu_decode.py --out "$OUT/gpu_decode_stall.json" --parts Stall --watchdog 25
    rc=$?
    echo "stall: rc=$rc in ${SECONDS} s"
    if [[ $rc != 0 ]]; then  # still stalls: what it takes to tell where (up to 3 minutes more)
        # The stalls ran on torchvision's libnvjpeg (CUDA 13.0), loaded first; the wheel's is 13.3.
        wheel_nvjpeg=/tmp/site/nvidia/cu13/lib/libnvjpeg.so.13
        echo "== the Stall part again with the wheel's libnvjpeg ($wheel_nvjpeg) =="
        SECONDS=0
        STOKER_NVJPEG=$wheel_nvjpeg timeout 60 python3 bench/gpu_decode.py --out "$OUT/gpu_decode_stall_wheel.json" \
            --parts Stall --watchdog 25
        echo "stall, wheel's libnvjpeg: rc=$? in ${SECONDS} s"
        echo "== bench/nvjpeg_hw_repro.py: nvJPEG alone, as stoker drove it before and as now (killed at 45 s each) =="
        for variant in "" "--reinit --sync"; do
            SECONDS=0
            timeout 45 python3 bench/nvjpeg_hw_repro.py --threads 3 --seconds 20 --stall-s 8 $variant
            echo "repro ${variant:-as before}: rc=$? in ${SECONDS} s"
        done
    fi

    echo "== bench/gpu_decode.py (stacks at 130 s, killed at 170 s) =="
    SECONDS=0
    timeout 170 python3 bench/gpu_decode.py --out "$OUT/gpu_decode.json" --rounds 2 --budget 90 --watchdog 130
    echo "bench: rc=$? in ${SECONDS} s"
    date -u +"end %Y-%m-%dT%H:%M:%SZ"
}

run 2>&1 | tee "$OUT/log.txt"
exit 0
