"""The stdlib-only core every layer may import: the Step contract, the engine protocol,
stats, theory, errors and token pieces."""
