// deepl-node's own jest suite (suite/, vendored from github.com/DeepLcom/deepl-node, MIT: suite/LICENSE) against
// the published package pinned in package.json: the suite's imports of the package's sources (`../src/…`) are
// mapped to the package's compiled files, which the npm package ships instead.
module.exports = {
  rootDir: __dirname,
  roots: ['<rootDir>/suite'],
  testEnvironment: 'node',
  transform: {
    '^.+\\.ts$': ['ts-jest', { isolatedModules: true, tsconfig: '<rootDir>/tsconfig.json' }],
  },
  moduleNameMapper: {
    '^(?:\\.\\.?/)+src$': '<rootDir>/node_modules/deepl-node/dist/index.js',
    '^(?:\\.\\.?/)+src/(.*)$': '<rootDir>/node_modules/deepl-node/dist/$1',
    '^axios$': '<rootDir>/node_modules/axios/dist/node/axios.cjs',
  },
};
