"""kiln.tools.profile: Nsight Compute, fallback profilers, SASS, roofline and findings for the Judge."""
