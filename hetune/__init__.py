"""hetune's command-line interface."""
