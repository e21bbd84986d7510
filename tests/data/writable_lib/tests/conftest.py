"""Like a large operator library's conftest: the run's results go to ``result.json`` in
the directory pytest runs from (the project root), opened when the session starts and
written as each case ends."""

import json

import pytest

RESULTS = {}


@pytest.fixture(scope="session", autouse=True)
def results_file():
    with open("result.json", "w", encoding="utf-8") as fh:
        fh.write("{}")
    yield
    with open("result.json", "w", encoding="utf-8") as fh:
        json.dump(RESULTS, fh)


def pytest_runtest_logreport(report):
    if report.when == "call":
        RESULTS[report.nodeid] = report.outcome
