#!/usr/bin/env bash
# CI reproduction job: the Table 4 GP rows on every mirrored dataset, Table 5's PubMed GP rows,
# and (too slow for CI otherwise) the GCN row with one seed on Cora only; then `gnngp report`,
# failing if a deterministic GP cell differs from the paper by more than 0.002 (known,
# documented deviations in gnngp_cli/paper/known_deviations.csv are reported, not failed).
#   usage: scripts/reproduce_ci.sh [out_dir]      (needs GNNGP_DATA_MIRROR)
set -euo pipefail
out="${1:-outputs/reproduce_ci}"
rm -rf "$out"
mkdir -p "$out"
common=(progress=false)
start=$(date +%s)
gnngp run -m experiment=table4 dataset=cora,citeseer,pubmed model=gcngp,gcngp_x,rbf,rbf_x,ggp,ggp_x \
  "${common[@]}" hydra.sweep.dir="$out/table4_gp"
gnngp run -m experiment=table4 dataset=chameleon,squirrel model=gcngp,gcngp_x,ggp,ggp_x "${common[@]}" hydra.sweep.dir="$out/table4_gp_heterophily"
# RBF(-X) on chameleon and squirrel: the search chooses gamma = 0.01, the grid's first value, on
# all four (docs/reproducing.md), so CI searches every 4th of the 101 values (26, the same ends):
# a subset holding the chosen value chooses it again, and the row is the full search's. A 101-value
# search on squirrel's 2,496 training nodes is two thirds of this job's time
gnngp run -m experiment=table4 dataset=chameleon,squirrel model=rbf,rbf_x kernel.gamma_grid.num=26 "${common[@]}" hydra.sweep.dir="$out/table4_rbf_heterophily"
gnngp run -m experiment=table5 dataset=pubmed model=gcngp,gcn2gp,gingp,sagegp "${common[@]}" hydra.sweep.dir="$out/table5_gp"
# GNN rows: one seed, Cora only (the report marks single-seed GNN cells)
gnngp run -m experiment=table4 dataset=cora model=gcn runs=1 "${common[@]}" hydra.sweep.dir="$out/table4_gnn"
echo "reproduction sweeps took $(( $(date +%s) - start )) s"
gnngp report "$out" --out "$out/report" --check-paper 0.002 --exclude crocodile,arxiv,reddit
