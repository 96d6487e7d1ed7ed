#!/usr/bin/env bash
# Rebuilds the .vmfb files in this folder and IREE's own view of them with iree-compile and
# iree-dump-module 3.13.0. Usage: regenerate.sh [BIN_DIR]   (default: the tools on PATH)
set -euo pipefail
cd "$(dirname "$0")"
bin=${1:+$1/}
compile=${bin}iree-compile
dump=${bin}iree-dump-module

vm=(--compile-from=vm)
"$compile" "${vm[@]}" add.mlir -o add.vmfb
"$compile" "${vm[@]}" rodata.mlir -o rodata.vmfb
"$compile" "${vm[@]}" --iree-vm-emit-polyglot-zip=false rodata.mlir -o rodata_nozip.vmfb
"$compile" "${vm[@]}" --iree-vm-target-extension-f32 --iree-vm-target-extension-f64 float.mlir -o float.vmfb
"$compile" "${vm[@]}" --iree-vm-bytecode-module-strip-source-map=true imports.mlir -o imports.vmfb
"$compile" "${vm[@]}" --iree-vm-bytecode-module-strip-source-map=true yieldable.mlir -o yieldable.vmfb
"$compile" --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu \
  --iree-llvmcpu-target-cpu=generic mul.mlir -o mul.vmfb

for module in add rodata rodata_nozip float imports yieldable mul; do
  "$dump" --output=flatbuffer-json "$module.vmfb" > "$module.json"
  "$dump" --output=metadata "$module.vmfb" > "$module.metadata.txt"
done
