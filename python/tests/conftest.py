"""Tests of the shardscope package run against this checkout's sources, not an installed copy."""

import os
import sys

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(PACKAGE_ROOT)
sys.path.insert(0, PACKAGE_ROOT)
