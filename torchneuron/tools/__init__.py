"""Command-line tools (console scripts) of TorchNeuron."""
