# Sourced by validate/python-pool-smoother.sh and validate/mg-setup.sh: mg_config SMOOTHER
# prints the multigrid config of the quenched beta 6.0 16^3x32 field of
# validate/multigrid.sh (clover c_sw 1.77, kappa 0.1345, tolerance 1e-10, the [multigrid]
# defaults but the smoother; MG_DEVICE, default cuda).
mg_config() { # smoother: the multigrid config on stdout
    cat <<TOML
[lattice]
LX = 16
LY = 16
LZ = 16
LT = 32

$(heatbath_gauge)

[dirac]
kappa = 0.1345
csw = 1.77

[source]
type = "point"

[solver]
method = "mg"
tolerance = 1e-10
max_iterations = 500

[backend]
device = "${MG_DEVICE:-cuda}"
kernel = "3.0"

[multigrid]
smoother = "$1"
TOML
}
