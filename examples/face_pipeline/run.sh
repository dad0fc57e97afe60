#!/usr/bin/env sh
# The face pipeline in one command: makes the synthetic video, runs reader -> detector ->
# writer over zimp (heap handles), then the 1->3 variant; outputs in ${1:-face_out}/.
#   ZIMP_LIBRARY=build/src/libzimp.so PYTHONPATH=python examples/face_pipeline/run.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-face_out}
mkdir -p "$out"
python3 "$here/make_video.py" "$out/input.mp4" --frames 150
python3 "$here/pipeline.py" --transport zimp --video "$out/input.mp4" --frames 150 --out "$out"
python3 "$here/pipeline.py" --transport zimp-slot --detectors 3 --video "$out/input.mp4" \
        --frames 150 --out "$out"
echo "outputs: $out/zimp-1.mp4 $out/zimp-1-contact.png $out/zimp-slot-3.mp4 $out/zimp-slot-3-contact.png"
