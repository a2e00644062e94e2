#!/usr/bin/env bash
# The GPU check, prepared for a lent GPU machine (fits 8 minutes on one H100, with nothing but the
# working tree): the `gpu`-marked tests, then bench/gpu/check.py (random weights of Qwen2.5-7B and
# Qwen3-8B shapes built on the GPU; ours against the official LatentMAS code; latent_mas vs text_mas).
#
#   bash bench/gpu/check.sh             # report.json, report.md and gpu_tests.txt under $OUT
#   bash bench/gpu/check.sh --dry-run   # tiny shapes on a CPU, no tests: seconds (CI runs this)
#
# The official code is your own checkout, never committed: put it in the ignored folder official/
# (git clone https://github.com/Gen-Verse/LatentMAS official) or set LATENTMAS_OFFICIAL=DIR.
# Python packages the machine lacks, or has too old (transformers < 5.19), are installed from wheels
# carried in the ignored folder .whl/ when it exists (pip download them there beforehand).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-runs/gpu-check}"
mkdir -p "$OUT"
PY="${PYTHON:-python}"

need=$("$PY" - <<'PYEOF'
import importlib.metadata as md, importlib.util
wanted = {"torch": None, "transformers": (5, 19), "tokenizers": None, "safetensors": None, "pyyaml": None,
          "lazy_loader": None, "jinja2": None, "accelerate": None, "pytest": None}
modules = {"pyyaml": "yaml"}
out = []
for pkg, least in wanted.items():
    if importlib.util.find_spec(modules.get(pkg, pkg)) is None:
        out.append(pkg)
    elif least and tuple(int(x) for x in md.version(pkg).split(".")[:2]) < least:
        out.append(f"{pkg}>={least[0]}.{least[1]}")
print(" ".join(out))
PYEOF
)
if [ -n "$need" ]; then
  if [ -d .whl ]; then
    echo "installing from .whl/: $need"
    "$PY" -m pip install -q --no-index --find-links .whl $need || echo "could not install all of: $need"
  else
    echo "this machine lacks: $need (carry their wheels in .whl/); going on with what it has"
  fi
fi

if [ "${1:-}" = "--dry-run" ]; then
  shift
  exec "$PY" bench/gpu/check.py --dry-run --out "$OUT" "$@"
fi

"$PY" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
# the gpu tests first (about a minute), each one named in gpu_tests.txt; a failure does not stop the bench
timeout 120 "$PY" -m pytest -m gpu tests/latent/test_gpu.py -q -rA -p no:cacheprovider >"$OUT/gpu_tests.txt" 2>&1
echo "gpu tests: exit $? ($(tail -1 "$OUT/gpu_tests.txt"))"
exec "$PY" bench/gpu/check.py --out "$OUT" --budget-s 300 "$@"
