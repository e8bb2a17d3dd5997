#!/usr/bin/env bash
# The call arrows of docs/ARCHITECTURE.md, which the includes alone do not
# show (a function declared in another file's header is called without an
# include of its own file's header), and the sizes the tree keeps.
#
# universal-ctags maps each function that is not static (lib/ and the
# launcher) to the file that defines it; a source file that names such a
# function of another file, called or taken as a callback (comments,
# strings and member names like ".attach" and "->attach" left out, and a
# name the file declares itself, a static function, a macro, a type, shadows
# it), has an arrow to that file.  The cases:
#   - no circle of calls between files, however far round;
#   - calls go down the levels (levels.bash, the same as arrows.sh's); the
#     launcher calls of the library's hidden functions only those of the
#     files amlrun links itself, and tools/ the public API only;
#   - a plugin (launcher/plugins/) includes and calls neither launcher/run/
#     nor another plugin;
#   - no .c or .h file of lib/, launcher/ or tools/ over 600 lines, no
#     function over 100;
#   - every .c file of lib/ and launcher/ named in its folder's README.md
#     (launcher/stacks/python/, a worker's and not amlrun's, aside: its
#     guard.c is named in launcher/stacks/README.md)
#     (launcher/*.c: in docs/ARCHITECTURE.md), as "name.c" or by a pattern
#     such as "host_sm*.c".
. "$(dirname "$0")/../../lib.sh"
. "$(dirname "$0")/levels.bash"

cd "$TOP" || exit 1
shopt -s nullglob
ctags_bin=${CTAGS:-ctags}
if ! "$ctags_bin" --version 2>/dev/null | grep -q 'Universal Ctags'; then
    fail "universal-ctags runs (Debian package universal-ctags)"
    exit 0
fi

# Sources: lib and the launcher define and call; tools/ call the library.
srcs=(lib/*/*.[ch] lib/*/*/*.[ch] launcher/*.[ch] launcher/*/*.[ch] launcher/*/*/*.[ch])
# Not amlrun's: what launcher/stacks/python/ holds is loaded into the
# Python workers (the hook, the guard preloaded there, which defines
# sigaction and signal themselves: amlrun's own calls of them are libc's).
for i in "${!srcs[@]}"; do
    case ${srcs[$i]} in launcher/stacks/python/*) unset 'srcs[i]' ;; esac
done
srcs=("${srcs[@]}")
tools=(tools/*.[ch] tools/*/*.[ch])
tags=$TEST_TMP/tags
"$ctags_bin" -x --_xformat='%F	%N	%k	%n	%e	%f	%{C.properties}' \
    --language-force=C --kinds-C='*' --fields=+ne --fields-C=+'{properties}' \
    "${srcs[@]}" "${tools[@]}" >"$tags" 2>"$TEST_TMP/ctags.err" ||
    { fail "ctags reads the sources"; diag "$(cat "$TEST_TMP/ctags.err")"; exit 0; }

levels=$TEST_TMP/levels
for d in "${!level[@]}"; do echo "$d ${level[$d]}"; done >"$levels"

out=$TEST_TMP/out
mkdir -p "$out"
perl -w - "$tags" "$levels" "$out" "${launcher_links[*]}" "${srcs[@]}" "${tools[@]}" <<'PERL' || { fail "calls.sh's reader runs"; exit 0; }
use strict;
my ($tags, $levels, $out, $links, @files) = @ARGV;
my (%def, %own, %fend);
my %linked = map { ("$_.c" => 1) } split ' ', $links;
my %scopes = map { $_ => 1 } qw(d t e g s u);   # a macro, type or enumerator: never ours to call
open my $t, '<', $tags or die "$tags: $!";
while (<$t>) {
    chomp;
    my ($file, $name, $kind, $line, $end, $fs, $props) = split /\t/, $_, -1;
    next if $kind eq 'p' || $kind eq 'x' || $kind eq 'h';
    if ($kind eq 'f') {
        push @{$fend{$file}}, [$name, $line, $end] if $end ne '';
        my $static = $fs eq 'file' || ($props // '') =~ /\bstatic\b/;
        # A header's static inline function is its includer's own code:
        # arrows.sh sees the include.
        next if $static && $file =~ /\.h$/;
        if (!$static && $name !~ /^__/) {
            push @{$def{$name}}, $file unless grep { $_ eq $file } @{$def{$name} || []};
            next;
        }
        $own{$file}{$name} = 2;
    } elsif ($scopes{$kind}) {
        $own{$file}{$name} = 2;
    } else {   # a variable, parameter, member or label: shadows a name not called
        $own{$file}{$name} ||= 1;
    }
}
close $t;

my %level;
open my $l, '<', $levels or die;
while (<$l>) { my ($d, $n) = split; $level{$d} = $n; }
close $l;
sub level_key {
    my ($d) = @_;
    return $d if exists $level{$d};
    my ($a, $b) = split m{/}, $d;
    return defined $b && exists $level{"$a/$b"} ? "$a/$b" : undef;
}
sub dir_of { my ($f) = @_; $f =~ s{/[^/]*$}{}; $f }
sub root { my ($f) = @_; $f =~ s{/.*}{}; $f }

# The arrows: $edge{from}{to}{name} = first line.
my %edge;
for my $f (grep { /\.c$/ } @files) {
    open my $fh, '<', $f or die "$f: $!";
    local $/;
    my $src = <$fh>;
    close $fh;
    # Comments, strings and characters out, their lines kept.
    $src =~ s{/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'}
             {my $m = $&; $m =~ tr/\n//cd; $m eq '' ? ' ' : $m}gse;
    $src =~ s/(?:\.|->)[ \t]*[A-Za-z_]\w*/ /g;    # members, designators
    my $ln = 1;
    while ($src =~ /(\n)|\b([A-Za-z_]\w*)(\s*\()?/g) {
        if (defined $1) { $ln++; next; }
        my ($name, $call) = ($2, defined $3);
        my $at = $ln;
        $ln += ($3 // '') =~ tr/\n//;
        my $in = $def{$name} or next;
        my $o = $own{$f}{$name} || 0;
        next if $o == 2 || ($o == 1 && !$call);
        # Three programs: the library; amlrun (launcher/ and the library);
        # the tools (tools/ and the library).  A name of the caller's own
        # part of its program comes first.
        my @mine = grep { root($_) eq root($f) } @$in;
        @mine = grep { root($_) eq 'lib' } @$in unless @mine;
        for my $to (@mine) {
            next if $to eq $f;
            $edge{$f}{$to}{$name} //= $at;
        }
    }
}

sub names {
    my ($from, $to) = @_;
    my $n = $edge{$from}{$to};
    my @s = sort { $n->{$a} <=> $n->{$b} } keys %$n;
    my $more = @s > 3 ? sprintf(" and %d more", @s - 3) : '';
    join(', ', map { "$_ ($from:$n->{$_})" } @s[0 .. ($#s < 2 ? $#s : 2)]) . $more;
}

sub put {
    my ($name, @lines) = @_;
    open my $o, '>', "$out/$name" or die;
    print $o "$_\n" for @lines;
    close $o;
}

# Circles: the strongly connected parts of the graph of files (Tarjan).
my (%index, %low, %on, @stack, @circles);
my $next = 0;
sub visit {
    my ($v) = @_;
    $index{$v} = $low{$v} = $next++;
    push @stack, $v;
    $on{$v} = 1;
    for my $w (sort keys %{$edge{$v} || {}}) {
        if (!exists $index{$w}) {
            visit($w);
            $low{$v} = $low{$w} if $low{$w} < $low{$v};
        } elsif ($on{$w}) {
            $low{$v} = $index{$w} if $index{$w} < $low{$v};
        }
    }
    if ($low{$v} == $index{$v}) {
        my @c;
        my $w;
        do { $w = pop @stack; $on{$w} = 0; push @c, $w; } while ($w ne $v);
        push @circles, [sort @c] if @c > 1;
    }
}
visit($_) for grep { !exists $index{$_} } sort keys %edge;
my (@circle, @circle_edges);
for my $c (sort { $a->[0] cmp $b->[0] } @circles) {
    push @circle, sprintf("call circle of %d files: %s", scalar @$c, join(' ', @$c));
    my %in = map { $_ => 1 } @$c;
    for my $from (@$c) {
        push @circle_edges, "  $from -> $_: " . names($from, $_)
            for grep { $in{$_} } sort keys %{$edge{$from}};
    }
}
put('edges', map { my $from = $_; map { "$from -> $_: " . join(' ', sort keys %{$edge{$from}{$_}}) } sort keys %{$edge{$from}} } sort keys %edge);
put('circles', @circle);
put('circle_edges', @circle_edges);

# Levels; hidden functions; plugins.
my (@up, @unknown, @hidden, @plugin);
for my $from (sort keys %edge) {
    my $fd = dir_of($from);
    my $fk = level_key($fd);
    for my $to (sort keys %{$edge{$from}}) {
        my $td = dir_of($to);
        my $tk = level_key($td);
        if ($from =~ m{^tools/}) {
            next if $to =~ m{^tools/};
            my @h = grep { !/^amldist_[a-z]/ } sort keys %{$edge{$from}{$to}};
            push @hidden, "$from calls ${to}'s " . join(', ', @h) . ": tools/ use the public API only" if @h;
            next;
        }
        if (!defined $fk) { push @unknown, $fd; next; }
        if (!defined $tk) { push @unknown, $td; next; }
        if ($from =~ m{^launcher/} && $to =~ m{^lib/} && !$linked{$to}) {
            my @h = grep { !/^amldist_[a-z]/ } sort keys %{$edge{$from}{$to}};
            push @hidden, "$from calls ${to}'s " . join(', ', @h) . " (the library hides it; amlrun does not link $to)" if @h;
        }
        if ($fk ne $tk && $level{$tk} >= $level{$fk}) {
            push @up, "$from calls $to: " . names($from, $to) . " ($fk, level $level{$fk}, may not call $tk, level $level{$tk})";
        }
        if ($from =~ m{^launcher/plugins/([^/]*)\.c$}) {
            my $me = $1;
            push @plugin, "$from calls $to: " . names($from, $to)
                if $to =~ m{^launcher/run/} || ($to =~ m{^launcher/plugins/([^/]*)\.[ch]$} && $1 ne $me);
        }
    }
}
for my $f (grep { m{^launcher/plugins/} } @files) {
    my ($me) = $f =~ m{/([^/]*)\.[ch]$};
    open my $fh, '<', $f or die;
    while (<$fh>) {
        next unless /^\s*#\s*include\s+"([^"]*)"/;
        my $inc = $1;
        my ($path) = grep { -f } ("launcher/$inc", dir_of($f) . "/$inc");
        next unless defined $path;
        $path =~ s{/[^/]+/\.\./}{/}g;
        push @plugin, "$f:$. includes $path"
            if $path =~ m{^launcher/run/} || ($path =~ m{^launcher/plugins/([^/]*)\.[ch]$} && $1 ne $me);
    }
    close $fh;
}
my %u = map { $_ => 1 } @unknown;
put('unknown', sort keys %u);
put('up', @up);
put('hidden', @hidden);
put('plugins', @plugin);

# Sizes.
my (@long_files, @long_fns);
for my $f (@files) {
    open my $fh, '<', $f or die;
    1 while <$fh>;
    push @long_files, "$f: $. lines" if $. > 600;
    close $fh;
}
for my $f (sort keys %fend) {
    for my $fn (@{$fend{$f}}) {
        my ($name, $line, $end) = @$fn;
        my $n = $end - $line + 1;
        push @long_fns, "$f:$line: $name is $n lines" if $n > 100;
    }
}
put('long_files', @long_files);
put('long_functions', @long_fns);

# Every .c file named in its folder's README.md: the README's words that
# end in .c, the name itself or a pattern.
my (%named, @unnamed);
for my $f (grep { m{^(lib|launcher)/.*\.c$} } @files) {
    my $d = dir_of($f);
    my $readme = $d eq 'launcher' ? 'docs/ARCHITECTURE.md' : "$d/README.md";
    if (!-f $readme) { push @unnamed, "$f: $readme does not exist"; next; }
    if (!$named{$readme}) {
        open my $fh, '<', $readme or die;
        local $/;
        my $text = <$fh>;
        close $fh;
        my %w;
        while ($text =~ m{([A-Za-z0-9_*./-]*\.c)\b}g) {
            (my $w = $1) =~ s{.*/}{};
            $w = quotemeta $w;
            $w =~ s/\\\*/.*/g;
            $w{$w} = 1;
        }
        $named{$readme} = [keys %w];
    }
    (my $base = $f) =~ s{.*/}{};
    push @unnamed, "$f is not named in $readme" unless grep { $base =~ /^$_$/ } @{$named{$readme}};
}
put('unnamed', @unnamed);
PERL

# CALLS_EDGES=FILE: every arrow written there, "from -> to: names".
[ -n "${CALLS_EDGES:-}" ] && cp "$out/edges" "$CALLS_EDGES"

# report NAME FILE: one case, passing when FILE is empty; its lines said.
report() {
    if [ -s "$2" ]; then
        fail "$1"
        while IFS= read -r line; do diag "$line"; done <"$2"
    else
        ok "$1"
    fi
}
report "every folder that calls or is called has a level (levels.bash, docs/ARCHITECTURE.md)" "$out/unknown"
report "no call circles between files" "$out/circles"
[ -s "$out/circle_edges" ] && { diag "the circles' arrows:"; while IFS= read -r l; do diag "$l"; done <"$out/circle_edges"; }
report "calls go down the levels only" "$out/up"
report "the launcher calls the library's own functions only in the files it links; tools/ the public API" "$out/hidden"
report "a plugin includes and calls neither launcher/run/ nor another plugin" "$out/plugins"
report "no file of lib/, launcher/, tools/ over 600 lines" "$out/long_files"
report "no function over 100 lines" "$out/long_functions"

report "every .c file named in its folder's README.md" "$out/unnamed"
