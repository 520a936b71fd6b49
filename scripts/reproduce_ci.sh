#!/usr/bin/env bash
# CI reproduction job: the Table 4 GP rows on every mirrored dataset and Table 5's PubMed GP rows
# (GCN on Cora, 100 epochs, is trained by the paper tests: tests/gnn/test_gnn.py); then `gnngp report`,
# failing if a deterministic GP cell is missing (--require-all) or differs from the paper by more than 0.002 (known,
# documented deviations in gnngp_cli/paper/known_deviations.csv are reported, not failed).
#   usage: scripts/reproduce_ci.sh [out_dir]      (needs GNNGP_DATA_MIRROR)
set -euo pipefail
out="${1:-outputs/reproduce_ci}"
own=(table4_gp table4_gp_heterophily table4_rbf_heterophily table5_gp report)
if [ -e "$out" ]; then
  # its own folders of an earlier run are replaced; anything else is a user's, never removed (the report would read it, too)
  [ -d "$out" ] || { echo "reproduce_ci.sh: error: $out is a file, not a folder; give a new or empty folder" >&2; exit 2; }
  for entry in "$out"/* "$out"/.[!.]*; do
    [ -e "$entry" ] || continue
    name=$(basename "$entry")
    if [[ ! " ${own[*]} " == *" $name "* ]]; then
      echo "reproduce_ci.sh: error: $out holds $name, which this job did not write; give a new or empty folder (it removes only its own: ${own[*]})" >&2
      exit 2
    fi
  done
  for name in "${own[@]}"; do rm -rf "${out:?}/$name"; done
fi
mkdir -p "$out"
common=(progress=false)
start=$(date +%s)
gnngp run -m experiment=table4 dataset=cora,citeseer,pubmed model=gcngp,gcngp_x,rbf,rbf_x,ggp,ggp_x \
  "${common[@]}" hydra.sweep.dir="$out/table4_gp"
gnngp run -m experiment=table4 dataset=chameleon,squirrel model=gcngp,gcngp_x,ggp,ggp_x "${common[@]}" hydra.sweep.dir="$out/table4_gp_heterophily"
# RBF(-X) on chameleon and squirrel: their 101-value search chooses gamma = 0.01, the grid's first
# value, on all four (docs/reproducing.md); CI searches the grid's two ends only (the paper's protocol
# leaves the number of values open): a subset holding the chosen value chooses it again, so the rows
# are the full search's, at a fiftieth of the eigendecompositions
gnngp run -m experiment=table4 dataset=chameleon,squirrel model=rbf,rbf_x kernel.gamma_grid.num=2 "${common[@]}" \
  hydra.sweep.dir="$out/table4_rbf_heterophily"
gnngp run -m experiment=table5 dataset=pubmed model=gcngp,gcn2gp,gingp,sagegp "${common[@]}" hydra.sweep.dir="$out/table5_gp"
echo "reproduction sweeps took $(( $(date +%s) - start )) s"
gnngp report "$out" --out "$out/report" --check-paper 0.002 --require-all --exclude crocodile,arxiv,reddit
