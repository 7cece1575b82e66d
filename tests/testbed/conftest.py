import pytest

from kfsim.testbed.netns import LOCK, available


def _busy() -> bool:
    import fcntl
    import os
    if not LOCK.exists():
        return False
    fd = os.open(LOCK, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


@pytest.fixture
def root_testbed():
    """Skip (with the reason) unless namespaces, veth and tc can be used here."""
    ok, why = available()
    if not ok:
        pytest.skip(f"testbed unavailable: {why}")
    if _busy():
        pytest.skip("another kfsim testbed (calibrate/validate) holds the testbed lock right now")
