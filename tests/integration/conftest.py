# SPDX-License-Identifier: Apache-2.0
"""pytest fixtures for the integration tests (see harness.py for what a suite is).

    host_env     session: root checked, service account, programs; no Docker (brokerd and
                 statd alone run on it: broker_rig.BrokerRig, Suite(daemons=("statd",)))
    rts_env      session: host_env with Docker checked and the worker image built under a
                 tag of this session's own (removed at the end, with the probe image's if
                 a test asked for it). Without Docker, every test using it fails (an
                 error at set-up, never a skip); the Docker-free ones still run.
    suite        module: one running installation shared by a module's tests
    make_suite   function: make_suite(config={...}) starts a private installation with
                 config overrides; stopped when the test ends

Every suite's teardown fails the test when a container of its installation is left once
the daemons stopped. A failing test's report carries the daemons' logs.
"""
import sys

import pytest

from harness import Environment, HarnessError, Suite


@pytest.fixture(scope="session")
def host_env():
    try:
        env = Environment.prepare(docker=False)
    except HarnessError as e:
        pytest.exit(f"integration tests cannot run: {e}", returncode=1)
    yield env
    for problem in env.cleanup():
        print(f"integration tests: {problem}", file=sys.stderr)


@pytest.fixture(scope="session")
def rts_env(host_env):
    # pytest keeps a session fixture's failure: each later test asking for Docker fails
    # with it too, without asking Docker again.
    try:
        host_env.require_docker()
        return host_env
    except HarnessError as e:
        why = str(e)
    pytest.fail(f"this test needs Docker: {why}", pytrace=False)


def _start(env, **kw):
    try:
        return Suite(env, **kw)
    except HarnessError as e:
        pytest.fail(f"the suite did not start: {e}", pytrace=False)


class SuiteFactory:
    def __init__(self, env):
        self.env = env
        self.suites = []

    def __call__(self, config=None, **kw):
        s = _start(self.env, config=config, **kw)
        self.suites.append(s)
        return s

    def stop_all(self):
        errors = []
        for s in self.suites:
            try:
                s.stop()
            except HarnessError as e:
                errors.append(str(e))
        return errors


@pytest.fixture(scope="module")
def suite(rts_env):
    s = _start(rts_env)
    yield s
    try:
        s.stop()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def make_suite(rts_env):
    factory = SuiteFactory(rts_env)
    yield factory
    errors = factory.stop_all()
    if errors:
        pytest.fail("; ".join(errors), pytrace=False)


def pytest_configure(config):
    config.addinivalue_line("markers", "docker: needs a Docker daemon (given to every test that uses a fixture in DOCKER_FIXTURES; "
                            "`-m 'not docker'` runs the others, on a host without Docker)")


# Fixtures that need a Docker daemon: a test using any of them is marked `docker`.
DOCKER_FIXTURES = {"rts_env", "precheck_image"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if DOCKER_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.docker)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed:
        return
    suites = []
    for v in getattr(item, "funcargs", {}).values():
        if isinstance(v, Suite):
            suites.append(v)
        elif isinstance(v, SuiteFactory):
            suites.extend(v.suites)
    for s in suites:
        rep.sections.append((f"daemon logs ({s.root})", s.logs()))
