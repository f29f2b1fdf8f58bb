#!/usr/bin/env bash
# CI for my_plugin: build the package against jaxonnx, then run its tests.
#   ./ci.sh            (in a fresh virtual environment)
set -euo pipefail
cd "$(dirname "$0")"
python -m pip install -q "jaxonnx>=0.1,<0.2" scikit-build-core pytest onnxruntime
# No build isolation: the plugin compiles against the SDK of the jaxonnx installed above.
python -m pip install -q --no-build-isolation --no-deps .
python -m jaxonnx plugins | grep -q "my_plugin" || { echo "jaxonnx does not list my_plugin"; exit 1; }
python -m pytest -q
