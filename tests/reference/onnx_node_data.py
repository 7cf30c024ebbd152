# onnx_node_data.py — writes the node tests of ONNX's backend suite (onnx.backend.test.case.node, the
# `onnx` wheel's own cases: one operator each, with numpy's reference outputs) as ONNX's runner lays
# them out: <out>/<case>/model.onnx and test_data_set_<i>/{input,output}_<j>.pb. The wheel's
# `cmd_tools generate-data` writes only the model suites. Cases whose inputs or outputs are not
# tensors (sequences, maps, optionals) are left out.
# Usage: python3 onnx_node_data.py <out folder>
import os
import sys

from onnx import TensorProto, numpy_helper
from onnx.backend.test.case import node

out = sys.argv[1]
for case in node.collect_testcases():
    graph = case.model.graph
    if not all(v.type.HasField("tensor_type") for v in list(graph.input) + list(graph.output)):
        continue
    folder = os.path.join(out, case.name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    for i, (inputs, outputs) in enumerate(case.data_sets):
        data = os.path.join(folder, f"test_data_set_{i}")
        os.makedirs(data, exist_ok=True)
        for kind, values, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
            for j, value in enumerate(values):
                proto = value if isinstance(value, TensorProto) else numpy_helper.from_array(value, infos[j].name)
                with open(os.path.join(data, f"{kind}_{j}.pb"), "wb") as f:
                    f.write(proto.SerializeToString())
