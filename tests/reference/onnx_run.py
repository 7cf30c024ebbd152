# onnx_run.py — checks an ONNX model with the onnx package's full checker (shape inference included)
# and runs it with ONNX Runtime on the CPU, printing what it finds as JSON: the graph's input and
# output shapes (a named axis as its name), the opset, and each output (shape, values) on the input.
# Usage: python3 onnx_run.py <model.onnx> <input.f32> <comma-separated input shape> <out.json>
import json
import sys

import numpy as np
import onnx
import onnxruntime

path, input_path, shape, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
model = onnx.load(path)
onnx.checker.check_model(model, full_check=True)


def dims(value):
    return [d.dim_param if d.dim_param else d.dim_value for d in value.type.tensor_type.shape.dim]


x = np.fromfile(input_path, dtype="<f4").reshape([int(d) for d in shape.split(",")])
session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
ys = session.run(None, {session.get_inputs()[0].name: x})
result = {
    "opset": [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")][0],
    "inputs": [dims(v) for v in model.graph.input],
    "outputs": [dims(v) for v in model.graph.output],
    "results": [{"shape": list(y.shape), "output": y.astype(np.float64).ravel().tolist()} for y in ys],
}
with open(out, "w") as f:
    json.dump(result, f)
