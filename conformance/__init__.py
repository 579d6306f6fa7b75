"""The conformance suite: spec-driven checks of any backend or implementation against torch and the spec.

Run it with `tox -e conformance` (PYTHON) or `tox -e conformance -- --backend CPU`; plain pytest works too:
`pytest conformance --backend CPU --hypothesis-profile dev`, and from any directory once tinyspec is installed,
`pytest --pyargs conformance --impl mypkg.adapter:MyAdapter --backend CPU` (docs/adapter.md). Where things are:

- catalogue/     one entry (`Op`) per public Tensor op and per ALU op: how to call it, its torch reference or
                 executable-spec oracle, its input domain, its spec clauses and its tolerance key.
- strategies.py  hypothesis strategies: shapes, axes, paddings, slices, and values that mix ordinary numbers with
                 the special values of spec/ops.md's edge-case tables.
- accuracy.py    the accuracy contract of spec/accuracy.md: reference rounding, ULPs, bound evaluation.
- properties.py  the properties (forward, vjp, finite differences, second order) as functions returning an
                 `Outcome` whose failure message ends with a reproduction.
- adapters/      the Adapter interface (adapters/base.py) and refimpl's adapter; `--impl module:Class` picks another.
- xfails.py      expected failures per backend, and known bugs with pinned reproductions (both strict).
- plugin.py      the pytest plugin (entry point `pytest11`): `--backend`, `--impl`, the hypothesis profiles ci / dev /
                 thorough, the `clauses` marker; conftest.py only registers it in a checkout that is not installed.
- baselines.py   the user's own expected failures and skips: --xfails-file, --skips-file, --write-xfails.
- reproduce.py   prints a failing test's reproduction as the last section of its report (CONF.REPRO.last).
- grade.py       `python -m conformance grade`: contributed ops (contrib.py), each in its own process, time-limited.
- tests/         the property tests, one per (entry, dtype), each marked with the clauses it checks.
"""
