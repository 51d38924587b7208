# Sourced by validate/python-pool-smoother.sh and validate/mg-setup.sh: mg_config SMOOTHER
# [KEY=VALUE...] prints the multigrid config of the quenched beta 6.0 16^3x32 field of
# validate/multigrid.sh (clover c_sw 1.77, kappa 0.1345, tolerance 1e-10, the [multigrid]
# defaults but the smoother; MG_DEVICE, default cuda; MG_DIMS, default 16x16x16x32, and
# MG_KAPPA, default 0.1345, for another volume or mass); each KEY=VALUE after the smoother
# is one more key of [multigrid], the value as TOML writes it.
mg_config() { # smoother [key=value...]: the multigrid config on stdout
    local smoother=$1
    shift
    local l=(${MG_DIMS:-16x16x16x32})
    l=(${l//x/ })
    cat <<TOML
[lattice]
LX = ${l[0]}
LY = ${l[1]}
LZ = ${l[2]}
LT = ${l[3]}

$(heatbath_gauge)

[dirac]
kappa = ${MG_KAPPA:-0.1345}
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
smoother = "$smoother"
TOML
    local kv
    for kv in "$@"; do
        echo "${kv%%=*} = ${kv#*=}"
    done
}
