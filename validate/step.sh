# Sourced by every device script (validate/on-device.sh, clover.sh, multigrid.sh,
# physics.sh, mg-setup.sh, python-pool-smoother.sh): the common set-up, `step` and the
# generated gauge field's config block.

# The paths every device script uses: the staged binaries ($bin, $q), the outputs ($res,
# /tmp/qcd-out), large files not sent back ($big, /tmp/qcd-big), what comes back ($out),
# the tuning cache, the log level and an empty $res/status.txt.
bin=$PWD/.device
q=$bin/qcd-solve
res=/tmp/qcd-out
big=/tmp/qcd-big
out=${OUT:-/tmp/qcd-return}
mkdir -p "$res" "$big" "$out"
export QCD_SOLVE_TUNE_CACHE=$res/tune.tsv RUST_LOG=${RUST_LOG:-warn}
: >"$res/status.txt"

step() { # name, command...: run it, record its exit code and seconds in $res/status.txt
    local name=$1; shift
    echo; echo "===== $name: $*"
    local t0=$(date +%s%N)
    "$@"
    local rc=$?
    echo "$name rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms" >>"$res/status.txt"
    return $rc
}

heatbath_gauge() { # the thermalised quenched beta 6.0 field (seed 6) as a [gauge] table
    cat <<TOML
[gauge]
type = "heatbath"
beta = 6.0
therm = 200
sweeps = 1
overrelax = 4
seed = 6
hot_start = false
TOML
}
