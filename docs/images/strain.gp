# docs/images/strain.gp - the multi-resolution cloth's strain against its
# time step, ours (bench/multires --repro, bench/README.md "The
# multi-resolution cloth against its paper", table 3) next to the paper's
# (Bender, Weber and Diziol 2013, table 3): 5 levels, a 5 m cloth hanging
# from two corners. Run from the repository root (Debian: gnuplot-nox):
#     gnuplot docs/images/strain.gp      # -> docs/images/strain.png
set terminal pngcairo size 640,400 font "sans,10"
set output "docs/images/strain.png"
set logscale xy
set xlabel "time step (ms)"
set ylabel "strain (%)"
set title "Multi-resolution cloth, 5 levels: strain falls as dt^2, like the paper's"
set key left top
set grid
set xrange [1:25]
# dt (ms), average 2D, average 2D+1D, max global 2D+1D: ours, then the paper's
$ours << EOD
20    33.6  20.6   64.1
10    7.99  4.83   18.0
5     2.25  1.30   5.30
2.5   0.56  0.34   1.44
1.25  0.142 0.085  0.37
EOD
$paper << EOD
20    56.4  34.4   96.9
10    13.6  8.29   27.6
5     3.39  2.06   8.03
2.5   0.85  0.52   2.28
1.25  0.21  0.13   0.74
EOD
plot $ours  using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "average, 2D (ours)", \
     $paper using 1:2 with linespoints lw 1 pt 6 dt 2 lc rgb "#1f77b4" title "average, 2D (paper)", \
     $ours  using 1:3 with linespoints lw 2 pt 7 lc rgb "#2ca02c" title "average, 2D+1D (ours)", \
     $paper using 1:3 with linespoints lw 1 pt 6 dt 2 lc rgb "#2ca02c" title "average, 2D+1D (paper)", \
     $ours  using 1:4 with linespoints lw 2 pt 7 lc rgb "#d62728" title "max global, 2D+1D (ours)", \
     $paper using 1:4 with linespoints lw 1 pt 6 dt 2 lc rgb "#d62728" title "max global, 2D+1D (paper)"
