"""Example contributions for `python -m conformance grade`: softsign_ok.py (correct) and softsign_bad.py (a planted
gradient bug: right values, wrong gradient)."""
