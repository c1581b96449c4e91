"""Human annotation: labelling batches exported from releases, labels imported back, and the
agreement statistics (Cohen's and Fleiss' kappa) that check people and automatic judges
against each other."""
