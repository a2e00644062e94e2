"""`python -m eval ...` == `latentworks ...` (so `accelerate launch -m eval eval ...` works)."""

from eval.cli import main

raise SystemExit(main())
