// Writes each test's full name, status and failure messages to the file named by SUITE_RESULTS: jest's own --json
// output fails on a failure that holds a circular object (an axios request), which deepl-node's errors do.
const { writeFileSync } = require('node:fs');

class SuiteResultsReporter {
  onRunComplete(_contexts, results) {
    const tests = results.testResults.flatMap((file) => [
      ...file.testResults.map((test) => ({
        fullName: test.fullName,
        status: test.status,
        failureMessages: test.failureMessages,
      })),
      ...(file.testExecError
        ? [{ fullName: '(file)', status: 'failed', failureMessages: [file.testExecError.message] }]
        : []),
    ]);
    writeFileSync(process.env.SUITE_RESULTS, JSON.stringify(tests));
  }
}
module.exports = SuiteResultsReporter;
