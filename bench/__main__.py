"""`python -m bench [WORKLOAD ...] [--quick]`: run workloads, verify results, write JSON + PNG, print tables."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback

from bench import ALIASES, WORKLOADS, expand
from bench import harness as h


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    ap.add_argument(
        "workloads",
        nargs="*",
        metavar="WORKLOAD",
        help=f"any of {', '.join(WORKLOADS)}, or an alias: {ALIASES} (default: all)",
    )
    ap.add_argument("--quick", action="store_true", help="smaller sizes: the whole suite in 2-3 minutes")
    ap.add_argument(
        "--wait-idle",
        type=float,
        default=0,
        metavar="SECONDS",
        help="before each workload, wait up to SECONDS for the 1-minute load average to drop below 1",
    )
    args = ap.parse_args(argv)
    try:
        names = expand(args.workloads, WORKLOADS)
    except ValueError as e:
        ap.error(str(e))

    m = h.machine()
    print(
        f"dbspark bench {'(quick) ' if args.quick else ''}{h.today()}: {m['cores']} cores, {m['mem_gib']} GiB, "
        f"Python {m['python']}; {', '.join(f'{k} {v}' for k, v in m['versions'].items())}"
    )
    failures: list[str] = []
    tables: list[str] = []
    t_all = time.perf_counter()
    for name in names:
        print(f"\n=== {name}{' (quick)' if args.quick else ''}", file=sys.stderr, flush=True)
        if args.wait_idle:
            la = h.wait_idle(args.wait_idle)
            print(f"  load average {la:.2f} at start", file=sys.stderr, flush=True)
        load_start = list(os.getloadavg())
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(f"bench.{name}")
            res = mod.run(args.quick)
        except h.Skipped as e:
            print(f"  {name}: skipped ({e})", flush=True)
            continue
        except h.Mismatch as e:
            msg = f"RESULT MISMATCH in {name}: {e}"
            print("\n" + "!" * 100 + f"\n{msg}\n" + "!" * 100, file=sys.stderr, flush=True)
            failures.append(msg)
            continue
        except Exception:  # noqa: BLE001 - report every workload, fail at the end
            msg = f"{name} failed:\n{traceback.format_exc()}"
            print(msg, file=sys.stderr, flush=True)
            failures.append(msg)
            continue
        wall = time.perf_counter() - t0
        res["wall_s"] = wall
        res["loadavg_start"] = load_start
        res["loadavg_end"] = list(os.getloadavg())
        png = h.plot(name, args.quick, res.pop("plot"), res.pop("plot_title"))
        res["png"] = png.name
        js = h.write_json(name, args.quick, res)
        print(res["table"])
        for line in res.get("notes", []):
            print(f"  - {line}")
        print(
            f"  ({wall:.0f}s; results {js.relative_to(h.RESULTS.parent.parent)}, plot {png.name})", flush=True
        )
        tables.append(res["table"])
    print(f"\ntotal {time.perf_counter() - t_all:.0f}s", flush=True)
    if failures:
        print(f"\nFAILED: {len(failures)} workload(s) did not verify or did not run:", file=sys.stderr)
        for f in failures:
            print(f"  * {f.splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
