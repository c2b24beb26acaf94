"""`python -m dev.bench [e2e|decode|cdc|debezium-batches|evolution-batches|semantic|unions|render] ...`:
the end-to-end benchmark (the default), the decode, CDC and batch benchmarks, the semantic types'
conversions, the Avro union check, and docs/performance.md rendered from a report.json."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dev.bench import REPO, cdc, decode
from dev.bench.spec import PARTS, RunSpec, WorkerSpec

COMMANDS = (
    "e2e", "decode", "cdc", "debezium-batches", "evolution-batches", "semantic", "unions", "render", "worker",
    "produce",
)  # fmt: skip


def e2e_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=2_000_000, help="records per variant (default 2M)")
    parser.add_argument("--repeat", type=int, default=3, help="measured runs per approach (median)")
    parser.add_argument(
        "--max-per-trigger", type=int, default=500_000,
        help="maxOffsetsPerTrigger of catch-up runs (0: none of the run's own, icesink's default)",
    )  # fmt: skip
    parser.add_argument("--sweep", default="25000,100000,250000,500000,1000000", help="maxOffsetsPerTrigger sizes")
    parser.add_argument("--sweep-records", type=int, default=1_000_000, help="records read per sweep run")
    parser.add_argument("--rates", default="5000,20000", help="freshness: input records/s, comma-separated")
    parser.add_argument("--seconds", type=int, default=60, help="freshness: seconds of steady input per run")
    parser.add_argument("--memory-records", type=int, default=2_000_000,
                        help="memory: records of its one run, in batches of 2M (default 2M)")  # fmt: skip
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    parser.add_argument("--out", type=Path, default=REPO / "bench-results")
    parser.add_argument("--render", action="store_true", help="only re-render --out/report.md from its report.json")


def numbers(option: str, text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x)
    except ValueError:
        raise ValueError(f"{option}: comma-separated whole numbers, not {text!r}") from None


def e2e(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    from dev.bench import e2e as bench
    from dev.bench import report as rep

    if args.render:
        md = rep.markdown(rep.load(args.out / "report.json"))
        (args.out / "report.md").write_text(md)
        print(md)
        return
    try:
        spec = RunSpec(
            records=args.records,
            repeat=args.repeat,
            max_per_trigger=args.max_per_trigger,
            sweep=numbers("--sweep", args.sweep),
            sweep_records=args.sweep_records,
            rates=numbers("--rates", args.rates),
            seconds=args.seconds,
            memory_records=args.memory_records,
            parts=tuple(p for p in args.only.split(",") if p),
        )
    except ValueError as e:
        parser.error(str(e))
    report = bench.run(spec, args.out)
    print()
    print(rep.markdown(report))
    print(f"benchmark took {report['seconds'] / 60:.1f} min; report in {args.out}")


def main(argv: list[str]) -> None:
    if not argv or argv[0] not in (*COMMANDS, "-h", "--help"):
        argv = ["e2e", *argv]  # `python -m dev.bench --records ...` is the end-to-end benchmark
    parser = argparse.ArgumentParser(prog="python -m dev.bench", description=__doc__)
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="{e2e,decode,cdc,debezium-batches,evolution-batches,semantic,unions,render}",
    )
    from dev.bench import e2e as e2e_module

    raw = argparse.RawDescriptionHelpFormatter
    e2e_arguments(sub.add_parser("e2e", help="the end-to-end benchmark", description=e2e_module.__doc__,
                                 formatter_class=raw))  # fmt: skip
    decode.add_arguments(sub.add_parser("decode", help="the Avro decoding benchmark", description=decode.__doc__,
                                        formatter_class=raw))  # fmt: skip
    cdc.add_arguments(sub.add_parser("cdc", help="the CDC benchmark", description=cdc.__doc__, formatter_class=raw))
    from dev.bench import debezium_batches, evolution_batches

    debezium_batches.add_arguments(sub.add_parser(
        "debezium-batches", help="batches of Debezium Connect JSON changes, one pass vs Spark's path",
        description=debezium_batches.__doc__, formatter_class=raw,
    ))  # fmt: skip
    evolution_batches.add_arguments(sub.add_parser(
        "evolution-batches", help="Avro batches that each bring a new writer schema, one pass vs Spark's path",
        description=evolution_batches.__doc__, formatter_class=raw,
    ))  # fmt: skip
    from dev.bench import semantic, unions

    semantic.add_arguments(sub.add_parser(
        "semantic", help="Debezium's ZonedTimestamp and VariableScaleDecimal, a whole array vs a value at a time",
        description=semantic.__doc__, formatter_class=raw,
    ))  # fmt: skip
    unions.add_arguments(sub.add_parser(
        "unions", help="the Avro union check: indexes placed from the decoded values vs the records read again",
        description=unions.__doc__, formatter_class=raw,
    ))  # fmt: skip
    render = sub.add_parser("render", help="docs/performance.md from a report.json")
    render.add_argument("report", type=Path, help="a report.json of `e2e` (with `decode` and `cdc` sections if any)")
    render.add_argument(
        "--out", type=Path, default=REPO / "docs" / "performance.md", help="default docs/performance.md"
    )
    sub.add_parser("worker").add_argument("spec")  # one measurement, run by `e2e` in its own process
    sub.add_parser("produce").add_argument("spec")  # the freshness run's steady producer
    args = parser.parse_args(argv)
    alone = {
        "decode": decode.main, "debezium-batches": debezium_batches.main, "evolution-batches": evolution_batches.main,
        "semantic": semantic.main, "unions": unions.main,
    }  # fmt: skip
    if args.command == "e2e":
        e2e(args, parser)
    elif args.command in alone:
        alone[args.command](args)
    elif args.command == "cdc":
        cdc.main(args, parser)
    elif args.command == "render":
        from dev.bench.render import render_file

        render_file(args.report, args.out)
        print(f"wrote {args.out}")
    elif args.command == "worker":
        from dev.bench.runners import worker

        worker(WorkerSpec.from_json(args.spec))
    else:
        from dev.bench.workloads import produce_steady

        spec = WorkerSpec.from_json(args.spec)
        produce_steady(spec.topic, spec.rate, spec.seconds, spec.variant)


if __name__ == "__main__":
    main(sys.argv[1:])
