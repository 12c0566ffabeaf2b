"""The TUI tests' fixtures. They live in ``tui_helpers`` with the helpers the tests import: a
module named ``conftest`` is ambiguous when several test folders are collected in one run."""
from tui_helpers import (  # noqa: F401  (fixtures are found by name in this module)
    comm_rec, failed_group, failed_rec, identical_group, nine_pass_rec, small_rec, variant_group)
