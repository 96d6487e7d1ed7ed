#!/bin/sh
# Rebuilds the test modules here with iree-compile 3.13.0 (from scripts/setup-iree).
#   tiny_add_vulkan.vmfb: fixtures/models/tiny_add.mlir compiled for Vulkan only, so loading it
#   on a CPU device fails in the module's initializer (no matching device).
set -e
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
bin=${IREE_BIN:-$("$repo/scripts/setup-iree")}
"$bin/iree-compile" --iree-hal-target-device=vulkan --iree-vulkan-target=rdna3 \
  --iree-vm-bytecode-module-strip-source-map=true \
  "$repo/fixtures/models/tiny_add.mlir" -o "$here/tiny_add_vulkan.vmfb"
