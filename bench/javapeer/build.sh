#!/bin/sh
# Build the RocketMQ 4.9.8 NameServer (+ fastjson 1.2.69) from source into $JAVAPEER_DIR/{lib,home}:
# the Java peer of `make bench` / `make bench-scale` (bench/README.md, "Without a distribution").
# Sources: git directories holding the tags rocketmq-all-4.9.8 and 1.2.69 (RMQ_GIT, FJ_GIT: bare
# clones or mirrors of apache/rocketmq and alibaba/fastjson). No source is changed.
# Debian jars: apt-get install libnetty-java liblogback-java libslf4j-java libcommons-lang3-java
#   libcommons-validator-java libcommons-cli-java liblz4-java libzstd-jni-java libjoda-time-java libguava-java
#   libcommons-beanutils-java libcommons-digester-java libcommons-logging-java libcommons-collections3-java
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
P=${JAVAPEER_DIR:-${TMPDIR:-/tmp}/namesrv-javapeer}  # what is built and run: outside the repository
RMQ_GIT=${RMQ_GIT:-/work/.mirror/apache+rocketmq/repo}
FJ_GIT=${FJ_GIT:-/work/.mirror/alibaba+fastjson/repo}
J=/usr/share/java
S=$P/src B=$P/build
JAVAC="nice -n 10 javac -nowarn -J-Xmx768m --release 8 -encoding UTF-8"
rm -rf "$S" "$B" && mkdir -p "$S" && cp -r "$HERE/stubs" "$S/stubs" && mkdir -p "$B" "$P/lib" "$P/home/conf" "$P/logs"
git --git-dir="$RMQ_GIT" archive --prefix=rocketmq/ rocketmq-all-4.9.8 \
    logging remoting common srvutil namesrv distribution/conf | tar x -C "$S"
git --git-dir="$FJ_GIT" archive --prefix=fastjson/ 1.2.69 src/main | tar x -C "$S"

# fastjson: core + support/moneta + support/springfox (against stand-ins in src/stubs/fastjson)
$JAVAC -d "$B/stubs-fastjson" $(find "$S/stubs/fastjson" -name '*.java')
{ find "$S/fastjson/src/main/java" -path '*/support/*' -prune -o -name '*.java' -print
  find "$S/fastjson/src/main/java/com/alibaba/fastjson/support/moneta" \
       "$S/fastjson/src/main/java/com/alibaba/fastjson/support/springfox" -name '*.java'; } > "$B/fastjson.list"
$JAVAC -cp "$B/stubs-fastjson:$J/joda-time.jar:$J/guava.jar" -d "$B/fastjson" @"$B/fastjson.list"
jar cf "$P/lib/fastjson-1.2.69.jar" -C "$B/fastjson" .

NETTY=$(for n in buffer codec common handler resolver transport transport-native-unix-common transport-native-epoll; do printf '%s:' "$J/netty-$n.jar"; done)
CP="$P/lib/fastjson-1.2.69.jar:${NETTY}$J/slf4j-api.jar:$J/logback-classic.jar:$J/logback-core.jar:$J/commons-lang3.jar:$J/commons-validator.jar:$J/commons-cli.jar:$J/lz4-java.jar:$J/zstd-jni.jar"
# stand-ins for the two client/tools classes ClusterTestRequestProcessor imports (not shipped)
$JAVAC -cp "$CP" -implicit:none -d "$B/stubs-rocketmq" \
    -sourcepath "$S/rocketmq/common/src/main/java:$S/rocketmq/remoting/src/main/java:$S/rocketmq/logging/src/main/java" \
    $(find "$S/stubs/rocketmq" -name '*.java')
for m in logging remoting common srvutil namesrv; do find "$S/rocketmq/$m/src/main/java" -name '*.java'; done > "$B/rocketmq.list"
$JAVAC -cp "$CP:$B/stubs-rocketmq" -d "$B/rocketmq" @"$B/rocketmq.list"
jar cf "$P/lib/rocketmq-namesrv-4.9.8-local.jar" -C "$B/rocketmq" .
cp "$S/rocketmq/distribution/conf/logback_namesrv.xml" "$P/home/conf/"
# run-time classpath: + commons-validator's own dependencies
echo "$P/lib/rocketmq-namesrv-4.9.8-local.jar:$CP:$J/commons-beanutils.jar:$J/commons-digester.jar:$J/commons-logging.jar:$J/commons-collections3.jar" > "$P/classpath"
echo "built: $(ls "$P/lib")"
