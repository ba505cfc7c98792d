import os

from hypothesis import settings

# One torch thread per test process (and the runs it starts), set before any test imports torch:
# under pytest-xdist (`make test`) each core runs a worker, whose thread pools would fight over the
# same cores; and two threads split a gradient's float sums differently from one run to the next,
# so the resume tests (a killed run equals an unbroken one, byte for byte) hold only with one.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# No deadlines: CI's 2-core machines are slow and noisy; examples are bounded instead.
settings.register_profile("default", deadline=None, max_examples=100)
settings.register_profile("ci", deadline=None, max_examples=100, derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny():
    from marl.models import load_tiny

    return load_tiny()


@pytest.fixture(scope="session")
def smollm2():
    from marl.players import model

    return model("smollm2-135m")
