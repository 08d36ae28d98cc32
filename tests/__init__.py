from pathlib import Path

# The repository's root: where `python -m bench` and the s3tests scripts run from.
REPOSITORY = Path(__file__).resolve().parent.parent
