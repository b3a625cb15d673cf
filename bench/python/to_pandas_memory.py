"""Peak memory of Session.query(...).to_pandas() against the DataFrame's own size (issue 17:
"a 10M-row query(...).to_pandas() holds memory near the DataFrame's own size").

    PYTHONPATH=build/python python3 bench/python/to_pandas_memory.py [rows]

Runs in a child process per shape so that each peak (ru_maxrss) is its own. Prints, per shape,
the DataFrame's bytes (memory_usage(deep=True)), the growth of the process's peak RSS while
to_pandas ran, and their ratio: 1.0 means nothing but the DataFrame was held.
"""

import json
import os
import subprocess
import sys
import tempfile

SHAPES = {
    # numbers, a timestamp and a nullable integer: arrays the DataFrame keeps as they come
    "numeric": "SELECT range AS id, range * 0.5 AS x, TIMESTAMP '2024-01-01' + "
               "to_microseconds(range) AS at, CASE WHEN range % 7 = 0 THEN NULL ELSE range END "
               "AS maybe FROM range({rows})",
    # text: Python str objects, as pandas holds them (object dtype)
    "mixed": "SELECT range AS id, 'customer-' || (range % 100000)::VARCHAR AS name, "
             "range * 0.25 AS amount FROM range({rows})",
}

CHILD = """
import json, os, resource, sys
import skippr
rows, sql = int(sys.argv[1]), sys.argv[2]
with open("skippr.yml", "w") as f:
    f.write("data_sources:\\n  s:\\n    Sample: {rows: 1}\\npipelines:\\n  p:\\n    data_source: data_sources.s\\n")
session = skippr.Session(skippr.Config.load("skippr.yml").get_pipeline("p"))
result = session.query(sql.format(rows=rows))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
frame = result.to_pandas()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"rows": len(frame), "frame_bytes": int(frame.memory_usage(deep=True).sum()),
                  "peak_growth_bytes": after - before}))
"""


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    python_path = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    print(f"to_pandas of {rows:,} rows: the process's peak growth against the DataFrame's size")
    for name, sql in SHAPES.items():
        with tempfile.TemporaryDirectory() as directory:
            output = subprocess.run([sys.executable, "-c", CHILD, str(rows), sql], cwd=directory,
                                    check=True, stdout=subprocess.PIPE, text=True,
                                    env={**os.environ, "PYTHONPATH": python_path}).stdout
        figures = json.loads(output)
        ratio = figures["peak_growth_bytes"] / figures["frame_bytes"]
        print(f"  {name:8s} DataFrame {figures['frame_bytes'] / 2**20:8.0f} MiB   peak growth "
              f"{figures['peak_growth_bytes'] / 2**20:8.0f} MiB   ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
