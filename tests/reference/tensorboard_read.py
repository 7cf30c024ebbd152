# tensorboard_read.py — reads a folder of event files with TensorBoard's own code and prints what
# it finds as JSON: every record through its checksummed record reader (a bad CRC or a truncated
# record fails), then the values through its EventAccumulator, as TensorBoard's server loads them.
# Usage: python3 tensorboard_read.py <logdir> <out.json>
import glob
import json
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow
from tensorboard.util import tensor_util

logdir, out = sys.argv[1], sys.argv[2]
files = sorted(glob.glob(logdir + "/*tfevents*"))
records = 0
for f in files:
    reader = pywrap_tensorflow.PyRecordReader_New(f)
    while True:
        try:
            reader.GetNext()  # raises DataLossError on a bad checksum or truncated record
        except errors.OutOfRangeError:
            break
        records += 1

acc = event_accumulator.EventAccumulator(logdir, size_guidance={k: 0 for k in event_accumulator.DEFAULT_SIZE_GUIDANCE})
acc.Reload()
tags = acc.Tags()
result = {"files": len(files), "records": records, "scalars": {}, "histograms": {}, "images": {}, "text": {}}
for tag in tags["scalars"]:
    result["scalars"][tag] = [[e.step, e.value] for e in acc.Scalars(tag)]
for tag in tags["histograms"]:
    result["histograms"][tag] = [
        {"step": e.step, "min": e.histogram_value.min, "max": e.histogram_value.max, "num": e.histogram_value.num,
         "sum": e.histogram_value.sum, "sum_squares": e.histogram_value.sum_squares,
         "limits": list(e.histogram_value.bucket_limit), "counts": list(e.histogram_value.bucket)}
        for e in acc.Histograms(tag)]
for tag in tags["images"]:
    result["images"][tag] = [
        {"step": e.step, "width": e.width, "height": e.height, "png_signature": e.encoded_image_string[:8].hex(),
         "bytes": len(e.encoded_image_string)} for e in acc.Images(tag)]
for tag in tags["tensors"]:
    if acc.SummaryMetadata(tag).plugin_data.plugin_name == "text":
        result["text"][tag] = [[e.step, tensor_util.make_ndarray(e.tensor_proto).item().decode()]
                               for e in acc.Tensors(tag)]
with open(out, "w") as fh:
    json.dump(result, fh)
