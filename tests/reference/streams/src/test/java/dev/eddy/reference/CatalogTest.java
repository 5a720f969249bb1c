package dev.eddy.reference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every scenario of the catalog, run through TopologyTestDriver, produces exactly the lines of
 * its {@code expected.jsonl} (same records, same order), and its {@code describe()} is exactly
 * its {@code describe.txt}. eddy's engine is held to the same files.
 */
class CatalogTest {
    private static final Path CATALOG = Path.of(System.getProperty("catalog.dir", "catalog"));

    static Stream<String> scenarios() {
        return Catalog.all().keySet().stream();
    }

    @ParameterizedTest
    @MethodSource("scenarios")
    void outputsMatchExpected(String name) {
        Path dir = CATALOG.resolve(name);
        List<String> actual = Driver.run(Catalog.get(name), JsonLines.read(dir.resolve("input.jsonl")))
                .stream().map(JsonLines::format).toList();
        List<String> expected = JsonLines.read(dir.resolve("expected.jsonl"))
                .stream().map(JsonLines::format).toList();
        assertEquals(String.join("\n", expected), String.join("\n", actual), name);
    }

    @ParameterizedTest
    @MethodSource("scenarios")
    void describeMatchesDescribeTxt(String name) throws Exception {
        String expected = Files.readString(CATALOG.resolve(name).resolve("describe.txt"));
        assertEquals(expected, Catalog.get(name).topology().get().describe().toString(), name);
    }

    @Test
    void everyScenarioHasAFolderAndEveryFolderAScenario() throws Exception {
        List<String> folders;
        try (Stream<Path> list = Files.list(CATALOG)) {
            folders = list.filter(Files::isDirectory).map(p -> p.getFileName().toString()).sorted().toList();
        }
        assertEquals(List.copyOf(Catalog.all().keySet()), folders);
        for (String name : folders) {
            assertTrue(Files.exists(CATALOG.resolve(name).resolve("expected.jsonl")), name);
            assertTrue(Files.exists(CATALOG.resolve(name).resolve("describe.txt")), name);
        }
    }
}
