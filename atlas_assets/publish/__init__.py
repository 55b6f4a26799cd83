"""Publication: the artifacts of one fit, stamped with its data hash and specification fingerprint, written as
an immutable versioned folder behind an atomically switched pointer; and the report built from those files.

artifacts.py: what is published and the refusals; store.py: versions, manifest, pointer, verification;
report.py and figures.py: the HTML page and its images; config.py: atlas_assets/config/publish.yaml.
"""
