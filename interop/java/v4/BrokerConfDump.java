// Reads broker.conf files as real RocketMQ 4.9.8 does (BrokerStartup: Properties.load, then
// MixAll.properties2Object into BrokerConfig, NettyServerConfig and MessageStoreConfig) and prints,
// per file, one line: "P" + hex(UTF-16) key/value pairs, then one "C" line with the fields rmqspec
// maps (each value as hex of its UTF-16 code units). Used by test_brokerconf_java.py.
import java.io.BufferedInputStream;
import java.io.FileInputStream;
import java.io.InputStream;
import java.util.Properties;
import java.util.TreeSet;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.store.config.MessageStoreConfig;

public class BrokerConfDump {
    static String hex(String s) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < s.length(); i++) sb.append(String.format("%04x", (int) s.charAt(i)));
        return sb.toString();
    }

    public static void main(String[] args) throws Exception {
        for (String file : args) {
            Properties p = new Properties();
            try (InputStream in = new BufferedInputStream(new FileInputStream(file))) {
                p.load(in);
            } catch (IllegalArgumentException e) {
                System.out.println("E " + hex(String.valueOf(e.getMessage())));
                continue;
            }
            StringBuilder line = new StringBuilder("P");
            for (String k : new TreeSet<>(p.stringPropertyNames())) {
                line.append(' ').append(hex(k)).append(':').append(hex(p.getProperty(k)));
            }
            System.out.println(line);
            BrokerConfig broker = new BrokerConfig();
            broker.setBrokerName("broker-a");  // the real default is the host name
            broker.setBrokerIP1("127.0.0.1");  // the real default is the machine's address
            NettyServerConfig netty = new NettyServerConfig();
            netty.setListenPort(10911);  // as BrokerStartup sets it before reading the file
            MessageStoreConfig store = new MessageStoreConfig();
            MixAll.properties2Object(p, broker);
            MixAll.properties2Object(p, netty);
            MixAll.properties2Object(p, store);
            String[] c = {
                "brokerClusterName", broker.getBrokerClusterName(),
                "brokerName", broker.getBrokerName(),
                "brokerIP1", broker.getBrokerIP1(),
                "listenPort", String.valueOf(netty.getListenPort()),
                "flushDiskType", store.getFlushDiskType().name(),
                "mappedFileSizeCommitLog", String.valueOf(store.getMappedFileSizeCommitLog()),
                "messageDelayLevel", store.getMessageDelayLevel(),
                "transactionTimeOut", String.valueOf(broker.getTransactionTimeOut()),
                "transactionCheckMax", String.valueOf(broker.getTransactionCheckMax()),
                "transactionCheckInterval", String.valueOf(broker.getTransactionCheckInterval()),
            };
            StringBuilder cl = new StringBuilder("C");
            for (int i = 0; i < c.length; i += 2) cl.append(' ').append(hex(c[i])).append(':').append(hex(c[i + 1]));
            System.out.println(cl);
        }
    }
}
