import os

from hypothesis import settings

# Under pytest-xdist (`make test`) each core runs a worker: one torch thread each, or the workers'
# thread pools fight over the same cores. Set before any test imports torch.
if os.environ.get("PYTEST_XDIST_WORKER"):
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
