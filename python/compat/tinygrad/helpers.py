"""tinygrad.helpers' names the tests use."""
import os


def getenv(key, default=0):
    return type(default)(os.getenv(key, default))


DEBUG, IMAGE, CI = getenv("DEBUG"), 0, os.getenv("CI", "") != ""
