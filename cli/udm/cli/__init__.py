"""udm.cli: the udm-cli command."""
