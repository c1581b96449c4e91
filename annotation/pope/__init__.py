"""POPE's curation stage: probes balanced per split, as POPE publishes them (``balance``)."""
