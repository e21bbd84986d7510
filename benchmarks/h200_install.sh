# Sourced by the h200_*.sh scripts: the machine's versions, then the project and the wheels it
# lacks (carried in .whl/) installed once into /tmp/site beside its torch and Triton.
PYV=$(python -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
python -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__, torch.cuda.get_device_name())"
if [ ! -d /tmp/site/mutant_gate ]; then
  pip install -q --no-deps --target /tmp/site $(ls .whl/*.whl | grep -E "none-any|$PYV") 2>&1 | tail -2
  pip install -q --no-deps --no-build-isolation --target /tmp/site . 2>&1 | tail -2
fi
export PYTHONPATH=/tmp/site
